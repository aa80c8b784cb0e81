// Jobs (jobs.peloton.io): the list, filterable, with counts per task state;
// one job's instances (its pods) and its rolling update's progress.

import { capped, fill, h, age, link, table } from "./dom.js";

const TYPES = ["BATCH", "STATELESS", "STATEFUL", "DAEMON"];

function taskCounts(job) {
  const ts = (job.status && job.status.taskStats) || {};
  return Object.entries(ts).filter(([, n]) => n > 0);
}

function stateTag(s) {
  const cls = /RUNNING|SUCCEEDED/.test(s) ? "ok" : /FAILED|KILLED|LOST/.test(s) ? "bad" : "";
  return h("span", { class: `tag ${cls}` }, s || "—");
}

function select(label, options, onchange) {
  return h("label", {}, label + " ",
    h("select", { onchange, "data-filter": label }, h("option", { value: "" }, "all"),
      options.map((o) => h("option", { value: o }, o))));
}

export function jobsPage(main, state) {
  const f = { text: "", type: "", pool: "", state: "" };
  const body = h("div", {});
  let redraw = () => {};
  const poolSel = h("select", { "data-filter": "pool", onchange: (e) => { f.pool = e.target.value; redraw(); } },
    h("option", { value: "" }, "all"));
  main.append(h("h1", {}, "Jobs"),
    h("div", { class: "filters" },
      h("input", { type: "search", placeholder: "name or namespace", "data-filter": "text",
        oninput: (e) => { f.text = e.target.value.trim(); redraw(); } }),
      select("type", TYPES, (e) => { f.type = e.target.value; redraw(); }),
      h("label", {}, "pool ", poolSel),
      select("state", ["INITIALIZED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "KILLED", "KILLING"],
        (e) => { f.state = e.target.value; redraw(); })),
    body);
  const page = {
    needs: ["jobs"],
    update() {
      const jobs = [...state.caches.jobs.items.values()];
      const pools = [...new Set(jobs.map((j) => j.spec && j.spec.resourcePool).filter(Boolean))].sort();
      if (poolSel.options.length - 1 !== pools.length || pools.some((p, i) => poolSel.options[i + 1].value !== p)) {
        const keep = poolSel.value;
        fill(poolSel, h("option", { value: "" }, "all"), pools.map((p) => h("option", { value: p }, p)));
        poolSel.value = pools.includes(keep) ? keep : "";
      }
      const shown = jobs.filter((j) => {
        const s = j.spec || {}, st = j.status || {}, m = j.metadata;
        return (!f.text || m.name.includes(f.text) || (m.namespace || "").includes(f.text)) &&
          (!f.type || s.type === f.type) && (!f.pool || s.resourcePool === f.pool) &&
          (!f.state || st.state === f.state);
      }).sort((a, b) => (a.metadata.namespace + "/" + a.metadata.name).localeCompare(b.metadata.namespace + "/" + b.metadata.name));
      const now = Date.now();
      fill(body, 
        h("p", { class: "muted" }, `${shown.length} of ${jobs.length} jobs`),
        table(["namespace", "name", "type", "pool", "instances", "state", "tasks", "update", "age"],
          capped(shown).rows.map((j) => {
            const s = j.spec || {}, st = j.status || {}, u = st.update || {}, m = j.metadata;
            return h("tr", { "data-job": `${m.namespace}/${m.name}` },
              h("td", {}, m.namespace), h("td", {}, link(`#/job/${m.namespace}/${m.name}`, m.name)),
              h("td", {}, s.type), h("td", {}, s.resourcePool),
              h("td", { class: "num" }, s.instanceCount === undefined ? "" : s.instanceCount),
              h("td", { "data-field": "state" }, stateTag(st.state)),
              h("td", { "data-field": "tasks" }, taskCounts(j).map(([k, n]) =>
                h("span", { class: "count", "data-task-state": k }, `${k} ${n}`))),
              h("td", {}, u.state ? `${u.state} ${u.progress || ""}` : ""),
              h("td", {}, age(m.creationTimestamp, now)));
          }), { class: "jobs" }), capped(shown).more);
    },
  };
  redraw = () => state.caches.jobs && state.caches.jobs.synced && page.update();
  return page;
}

function restarts(pod) {
  return ((pod.status && pod.status.containerStatuses) || []).reduce((n, c) => n + (c.restartCount || 0), 0);
}

export function waitReason(pod) {
  const c = ((pod.status && pod.status.conditions) || []).find((x) => x.type === "PodScheduled");
  return c && c.status !== "True" ? c : null;
}

function progress(u) {
  const total = u.instancesTotal || 0, done = u.instancesDone || 0, failed = u.instancesFailed || 0;
  const pct = (x) => `${total ? Math.min(100, (x / total) * 100) : 0}%`;
  return h("div", { class: "update", "data-update-state": u.state },
    h("div", {}, h("b", {}, "Rolling update "), stateTag(u.state), " ", u.progress || `${done}/${total}`,
      u.fromVersion !== undefined ? h("span", { class: "muted" }, ` version ${u.fromVersion} → ${u.toVersion}`) : "",
      u.batchSize !== undefined ? h("span", { class: "muted" }, `, batch size ${u.batchSize}`) : ""),
    h("div", { class: "progress" }, h("span", { class: "done", style: `width:${pct(done)}` }),
      h("span", { class: "failed", style: `width:${pct(failed)}` })),
    (u.currentBatch || []).length ? h("div", {}, "now updating instances: " + u.currentBatch.join(", ")) : null,
    u.message ? h("div", { class: "muted" }, u.message) : null);
}

export function jobPage(main, state) {
  const body = h("div", {});
  main.append(body);
  return {
    needs: ["jobs", "pods", "events"],
    update(ns, name) {
      const job = state.caches.jobs.items.get(`${ns}/${name}`);
      const now = Date.now();
      if (!job) {
        fill(body, h("h1", {}, `Job ${ns}/${name}`), h("p", { class: "muted" }, "No such job (or it was deleted)."));
        return;
      }
      const s = job.spec || {}, st = job.status || {};
      const pods = [...state.caches.pods.items.values()].filter((p) => p.metadata.namespace === ns &&
        (p.metadata.labels || {})["peloton.io/job"] === name);
      const inst = (p) => parseInt((p.metadata.labels || {})["peloton.io/instance"], 10);
      pods.sort((a, b) => inst(a) - inst(b) || a.metadata.name.localeCompare(b.metadata.name));
      const events = [...state.caches.events.items.values()].filter((e) =>
        (e.involvedObject || {}).kind === "Job" && e.involvedObject.name === name && e.involvedObject.namespace === ns);
      fill(body, 
        h("h1", {}, `Job ${ns}/${name} `, stateTag(st.state)),
        h("p", {}, `${s.type} in pool `, h("b", {}, s.resourcePool || "?"),
          s.instanceCount !== undefined ? `, ${s.instanceCount} instances` : "",
          s.sla && s.sla.priority ? `, priority ${s.sla.priority}` : "",
          s.sla && s.sla.preemptible ? ", preemptible" : ""),
        h("p", { "data-field": "tasks" }, taskCounts(job).map(([k, n]) =>
          h("span", { class: "count", "data-task-state": k }, `${k} ${n}`))),
        st.update ? progress(st.update) : null,
        (st.conditions || []).filter((c) => c.status === "False" && c.type !== "Update").map((c) =>
          h("p", { class: "warn" }, `${c.type}: ${c.reason || ""} ${c.message || ""}`)),
        h("h2", {}, "Instances"),
        table(["instance", "pod", "phase", "node", "restarts", "run", "waiting because", "age"], capped(pods).rows.map((p) => {
          const w = waitReason(p), a = p.metadata.annotations || {};
          return h("tr", { "data-pod": p.metadata.name },
            h("td", { class: "num" }, isNaN(inst(p)) ? "" : inst(p)),
            h("td", {}, link(`#/pod/${ns}/${p.metadata.name}`, p.metadata.name)),
            h("td", { "data-field": "phase" }, p.metadata.deletionTimestamp ? "Terminating" : (p.status || {}).phase || ""),
            h("td", { "data-field": "node" }, (p.spec || {}).nodeName || ""),
            h("td", { class: "num" }, restarts(p)), h("td", { class: "num" }, a["peloton.io/run"] || ""),
            h("td", {}, w ? `${w.reason || ""}: ${w.message || ""}` : ""),
            h("td", {}, age(p.metadata.creationTimestamp, now)));
        }), { class: "instances" }), capped(pods).more,
        events.length ? h("h2", {}, "Events") : null,
        events.length ? table(["type", "reason", "message", "count", "last seen"], events.map((e) =>
          h("tr", {}, h("td", {}, e.type), h("td", {}, e.reason), h("td", {}, e.message),
            h("td", { class: "num" }, e.count || 1), h("td", {}, age(e.lastTimestamp || e.metadata.creationTimestamp, now) + " ago")))) : null);
    },
  };
}
