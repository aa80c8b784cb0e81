// Hosts (Nodes) with what their pods hold of each kind, and the pods that
// wait, by pool, with the reason they wait.

import { capped, fill, h, age, link, table } from "./dom.js";
import { KINDS, format, nodeAllocatable, podRequests } from "./quantity.js";
import { waitReason } from "./pages_jobs.js";

function active(pod) {
  const ph = (pod.status || {}).phase;
  return ph !== "Succeeded" && ph !== "Failed";
}

function meter(kind, used, cap) {
  const pct = cap ? Math.min(100, (used / cap) * 100) : 0;
  return h("div", { class: "meter", title: `${format(kind, used)} of ${format(kind, cap)}` },
    h("span", { class: `fill ${pct > 90 ? "hot" : ""}`, style: `width:${pct}%` }),
    h("span", { class: "text", "data-kind": kind }, `${format(kind, used)} / ${format(kind, cap)}`));
}

export function hostsPage(main, state) {
  const body = h("div", {});
  let text = "", page = null;
  main.append(h("h1", {}, "Hosts"),
    h("div", { class: "filters" }, h("input", { type: "search", placeholder: "name or backend", "data-filter": "text",
      oninput: (e) => { text = e.target.value.trim(); if (state.caches.nodes && state.caches.nodes.synced) page.update(); } })),
    body);
  return page = {
    needs: ["nodes", "pods"],
    update() {
      const used = new Map(), count = new Map();
      for (const p of state.caches.pods.items.values()) {
        const n = (p.spec || {}).nodeName;
        if (!n || !active(p)) continue;
        const r = podRequests(p), u = used.get(n) || { cpu: 0, memory: 0, disk: 0, gpu: 0 };
        for (const k of KINDS) u[k] += r[k];
        used.set(n, u);
        count.set(n, (count.get(n) || 0) + 1);
      }
      const all = [...state.caches.nodes.items.values()];
      const nodes = all.filter((n) => !text || n.metadata.name.includes(text) ||
        ((n.metadata.labels || {})["peloton.io/backend"] || "kubelet").includes(text))
        .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
      const { rows, more } = capped(nodes);
      const now = Date.now();
      fill(body, h("p", { class: "muted" }, `${nodes.length} of ${all.length} hosts; allocated is the sum of the ` +
        "requests of the pods bound to each that have not ended"),
      table(["name", "backend", "ready", "schedulable", "pods", ...KINDS.map((k) => `${k} allocated / allocatable`), "age"],
        rows.map((n) => {
          const name = n.metadata.name, labels = n.metadata.labels || {}, spec = n.spec || {};
          const ready = ((n.status || {}).conditions || []).find((c) => c.type === "Ready");
          const cap = nodeAllocatable(n), u = used.get(name) || { cpu: 0, memory: 0, disk: 0, gpu: 0 };
          const taints = (spec.taints || []).map((t) => `${t.key}${t.value ? "=" + t.value : ""}:${t.effect}`);
          return h("tr", { "data-node": name },
            h("td", {}, name), h("td", { "data-field": "backend" }, labels["peloton.io/backend"] || "kubelet"),
            h("td", { "data-field": "ready" }, h("span", { class: `tag ${ready && ready.status === "True" ? "ok" : "bad"}` },
              ready ? (ready.status === "True" ? "Ready" : "NotReady") : "Unknown")),
            h("td", { "data-field": "cordon" }, spec.unschedulable ? h("span", { class: "tag warn" }, "cordoned") : "yes",
              taints.length ? h("div", { class: "muted small" }, taints.join(", ")) : null),
            h("td", { class: "num" }, count.get(name) || 0),
            KINDS.map((k) => h("td", {}, meter(k, u[k], cap[k]))),
            h("td", {}, age(n.metadata.creationTimestamp, now)));
        }), { class: "hosts" }), more);
    },
  };
}

function priority(p) {
  return parseInt(((p.metadata.annotations || {})["peloton.io/priority"]) || "0", 10) || 0;
}

export function pendingPage(main, state) {
  const body = h("div", {});
  main.append(h("h1", {}, "Pending pods"), body);
  return {
    needs: ["pods"],
    update() {
      const pools = state.caches.pools.items;
      const byPool = new Map();
      for (const p of state.caches.pods.items.values()) {
        if ((p.spec || {}).nodeName || (p.status || {}).phase !== "Pending" || p.metadata.deletionTimestamp) continue;
        const pool = (p.metadata.labels || {})["peloton.io/resource-pool"] || "";
        if (!byPool.has(pool)) byPool.set(pool, []);
        byPool.get(pool).push(p);
      }
      const path = (name) => { const p = pools.get(name); return (p && p.status && p.status.path) || `/${name}`; };
      const names = [...byPool.keys()].sort((a, b) => path(a).localeCompare(path(b)));
      const now = Date.now();
      // Within a pool, the resource manager's order: higher priority first, then the older.
      const order = (a, b) => priority(b) - priority(a) ||
        Date.parse(a.metadata.creationTimestamp) - Date.parse(b.metadata.creationTimestamp) ||
        a.metadata.name.localeCompare(b.metadata.name);
      fill(body, names.length ? names.map((pool) => {
        const all = byPool.get(pool).sort(order), { rows: list, more } = capped(all);
        return h("section", { "data-pool": pool || "(none)" },
          h("h2", {}, pool ? `${pool} ` : "(no pool) ", h("span", { class: "muted" }, `${pool ? path(pool) : ""} — ${all.length} waiting`)),
          table(["#", "pod", "job", "priority", "waiting for", "reason", "message"], list.map((p, i) => {
            const w = waitReason(p) || {}, m = p.metadata, l = m.labels || {};
            return h("tr", { "data-pod": `${m.namespace}/${m.name}` },
              h("td", { class: "num" }, i + 1),
              h("td", {}, link(`#/pod/${m.namespace}/${m.name}`, `${m.namespace}/${m.name}`)),
              h("td", {}, l["peloton.io/job"] ? link(`#/job/${m.namespace}/${l["peloton.io/job"]}`, l["peloton.io/job"]) : ""),
              h("td", { class: "num" }, priority(p)), h("td", {}, age(m.creationTimestamp, now)),
              h("td", { "data-field": "reason" }, w.reason || ""), h("td", {}, w.message || ""));
          })), more);
      }) : h("p", { class: "muted" }, "No pod is waiting."));
    },
  };
}
