// The resource pool tree: per pool and kind, reservation, limit,
// entitlement, allocation and demand as the resource manager wrote them
// (status.summary for the text, the exact quantities for the bars), the
// last hour of entitlement, allocation and demand, and the preemptions the
// pool took part in.

import { fill, h, svg, age } from "./dom.js";
import { KINDS, parse, format } from "./quantity.js";

const FIELDS = ["reservation", "limit", "entitlement", "allocation", "demand"];
const EVENTS_SHOWN = 5;

function parentOf(p) {
  const parent = (p.spec && p.spec.parent) || "";
  return parent === "root" ? "" : parent;
}

// Pools in tree order with their depth.
function preorder(pools) {
  const kids = new Map();
  for (const p of pools) {
    const par = parentOf(p);
    if (!kids.has(par)) kids.set(par, []);
    kids.get(par).push(p);
  }
  for (const l of kids.values()) l.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const names = new Set(pools.map((p) => p.metadata.name));
  const out = [];
  const walk = (parent, depth) => {
    for (const p of kids.get(parent) || []) {
      out.push({ pool: p, depth });
      walk(p.metadata.name, depth + 1);
    }
  };
  walk("", 0);
  for (const p of pools) // orphans (their parent not stored yet): at the top, to be seen
    if (parentOf(p) && !names.has(parentOf(p))) {
      out.push({ pool: p, depth: 0 });
      walk(p.metadata.name, 1);
    }
  return out;
}

// Exact numbers for the bars: reservation from the spec, the limit the
// effective one (the lowest of the pool's and its ancestors'), the rest
// from status.
function exact(pool, byName, kind) {
  const spec = (r) => ((r.spec && r.spec.resources) || []).find((x) => x.kind === kind) || {};
  const st = pool.status || {};
  let limit = Infinity;
  for (let p = pool, depth = 0; p && depth < 32; p = byName.get(parentOf(p)), depth++) {
    const l = parse(spec(p).limit);
    if (isFinite(l)) limit = Math.min(limit, l);
  }
  return {
    reservation: parse(spec(pool).reservation) || 0,
    limit,
    entitlement: parse((st.entitlement || {})[kind]),
    allocation: parse((st.allocation || {})[kind]),
    demand: parse((st.demand || {})[kind]),
  };
}

// Allocation and demand as bars, reservation, entitlement and limit as
// marks, on one scale.
function bars(v) {
  const top = Math.max(...[v.reservation, v.entitlement, v.allocation, v.demand, isFinite(v.limit) ? v.limit : 0]
    .filter((x) => isFinite(x)), 0);
  if (!top) return h("div", { class: "bars empty" });
  const pct = (x) => `${Math.max(0, Math.min(100, (x / top) * 100))}%`;
  const mark = (cls, x, title) => isFinite(x) && h("span", { class: `mark ${cls}`, style: `left:${pct(x)}`, title });
  return h("div", { class: "bars" },
    h("span", { class: "bar demand", style: `width:${pct(v.demand || 0)}` }),
    h("span", { class: "bar allocation", style: `width:${pct(v.allocation || 0)}` }),
    mark("reservation", v.reservation, "reservation"),
    mark("entitlement", v.entitlement, "entitlement"),
    isFinite(v.limit) && mark("limit", v.limit, "limit"));
}

// The last hour of one kind: entitlement, allocation and demand as lines.
function chart(hist, kind, now) {
  const W = 160, H = 28;
  if (!hist || !hist.length) return h("span", { class: "chart" });
  // from the first sample this tab has (at most an hour ago), so a fresh tab's chart is not a dot at its right
  const t0 = Math.min(Math.max(now - 3600 * 1000, hist[0].t), now - 60 * 1000);
  let top = 0;
  for (const s of hist) for (const f of ["entitlement", "allocation", "demand"]) top = Math.max(top, s.kinds[kind][f] || 0);
  if (!top) return h("span", { class: "chart" });
  const x = (t) => (((Math.max(t, t0) - t0) / (now - t0)) * W).toFixed(1);
  const y = (v) => (H - 1 - ((v || 0) / top) * (H - 2)).toFixed(1);
  const line = (f) => {
    let d = "", last = null;
    for (const s of hist) {
      const v = s.kinds[kind][f];
      d += last === null ? `M${x(s.t)},${y(v)}` : `H${x(s.t)}V${y(v)}`;
      last = v;
    }
    return svg("path", { d: d + `H${W}`, class: `line ${f}` });
  };
  return svg("svg", { class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}` },
    svg("title", {}, `${kind} over the last ${Math.round((now - t0) / 60000)} min seen by this tab: ` +
      "entitlement (dashed), allocation, demand"),
    line("demand"), line("entitlement"), line("allocation"));
}

// Events that explain a pool's preemptions: Preempting on the pool (it gains),
// Preempted on its pods (it gives back).
function poolEvents(state, events) {
  const by = new Map();
  const add = (pool, e) => {
    if (!by.has(pool)) by.set(pool, []);
    by.get(pool).push(e);
  };
  for (const e of events) {
    const io = e.involvedObject || {};
    if (io.kind === "ResourcePool") add(io.name, e);
    else if (io.kind === "Pod" && (e.reason === "Preempted" || e.reason === "Preempting")) {
      const pool = state.podPool.get(`${io.namespace}/${io.name}`);
      if (pool) add(pool, e);
    }
  }
  const t = (e) => Date.parse(e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp) || 0;
  for (const l of by.values()) l.sort((a, b) => t(b) - t(a));
  return by;
}

// The resource manager's conditions (Admitting, Borrowing, Terminating),
// each as a tag with its reason; the message and since when on hover, and
// as text for those not in their quiet state.
const QUIET = { Admitting: "True", Borrowing: "False" };

function conditions(list, now) {
  if (!list || !list.length) return null;
  return h("div", { class: "conditions" }, list.map((c) => {
    const quiet = QUIET[c.type] === c.status;
    const cls = quiet ? "tag" : c.type === "Borrowing" ? "tag warn" : "tag bad";
    return h("span", { class: "condition", "data-type": c.type, "data-status": c.status },
      h("span", { class: cls, title: `${c.message || ""}${c.lastTransitionTime ? ` (since ${c.lastTransitionTime})` : ""}` },
        `${c.type}=${c.status}`, c.reason ? ` ${c.reason}` : ""),
      !quiet && c.message ? h("span", { class: "small muted", "data-field": "message" }, ` ${c.message}` +
        (c.lastTransitionTime ? ` (for ${age(c.lastTransitionTime, now)})` : "")) : null, " ");
  }));
}

export function poolsPage(main, state) {
  const body = h("div", { class: "pools" });
  main.append(h("h1", {}, "Resource pools"),
    h("p", { class: "legend" },
      h("span", { class: "key allocation" }), "allocation ", h("span", { class: "key demand" }), "demand ",
      h("span", { class: "key mark-entitlement" }), "entitlement ", h("span", { class: "key mark-reservation" }),
      "reservation ", h("span", { class: "key mark-limit" }), "limit (effective); the chart is the last hour ",
      "seen by this tab"),
    body);
  return {
    needs: ["pools", "events", "pods"],
    update() {
      const pools = [...state.caches.pools.items.values()];
      const byName = new Map(pools.map((p) => [p.metadata.name, p]));
      const evs = poolEvents(state, state.caches.events.items.values());
      const now = Date.now();
      const rows = [];
      for (const { pool, depth } of preorder(pools)) {
        const name = pool.metadata.name, st = pool.status || {}, sum = st.summary || {};
        const head = h("tr", { class: "pool-head", "data-pool": name },
          h("td", { colspan: 8, style: `padding-left:${0.5 + depth * 1.5}em` },
            h("span", { class: "pool-name" }, name), " ", h("span", { class: "muted" }, st.path || "(no status yet)"),
            pool.metadata.deletionTimestamp && h("span", { class: "tag warn" }, "deleting"),
            st.gangs && h("span", { class: "gangs" }, " gangs: ",
              h("span", { "data-field": "gangs-pending" }, `${st.gangs.pending || 0}`), " pending, ",
              h("span", { "data-field": "gangs-running" }, `${st.gangs.running || 0}`), " running"),
            conditions(st.conditions, now)));
        rows.push(head);
        for (const kind of KINDS) {
          const s = sum[kind] || {};
          const v = exact(pool, byName, kind);
          rows.push(h("tr", { class: "pool-kind", "data-pool": name, "data-kind": kind },
            h("td", { style: `padding-left:${1.5 + depth * 1.5}em` }, kind),
            FIELDS.map((f) => h("td", { class: "num", "data-field": f, title: isFinite(v[f]) ? format(kind, v[f]) : "" },
              s[f] === undefined ? "" : s[f])),
            h("td", { class: "bars-cell" }, bars(v)),
            h("td", {}, chart(state.history.get(name), kind, now))));
        }
        const list = (evs.get(name) || []).slice(0, EVENTS_SHOWN);
        if (list.length)
          rows.push(h("tr", { class: "pool-events", "data-pool": name },
            h("td", { colspan: 8, style: `padding-left:${1.5 + depth * 1.5}em` },
              h("ul", {}, list.map((e) => {
                const io = e.involvedObject || {};
                const who = io.kind === "Pod" ? h("a", { href: `#/pod/${io.namespace}/${io.name}` }, io.name) : null;
                return h("li", { class: `event ${e.type === "Warning" ? "warn" : ""}`, "data-reason": e.reason },
                  h("b", {}, e.reason), " ", who, who && ": ", e.message,
                  e.count > 1 ? ` (×${e.count})` : "", " ", h("span", { class: "muted" },
                    age(e.lastTimestamp || e.metadata.creationTimestamp, now) + " ago"));
              })))));
      }
      fill(body, pools.length
        ? h("table", { class: "pool-table" },
          h("thead", {}, h("tr", {}, ["kind", ...FIELDS, "", "last hour"].map((c) => h("th", {}, c)))),
          h("tbody", {}, rows))
        : h("p", { class: "muted" }, "No ResourcePools yet: kubectl apply -f examples/pools.yaml"));
    },
  };
}
