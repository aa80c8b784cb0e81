// The UI's shell: the token, the watched resources, the pools' history and
// the router (#/pools, #/jobs, #/job/NS/NAME, #/pod/NS/NAME, #/hosts,
// #/pending). Pages are in pages_*.js; each names the resources it needs and
// re-renders from the caches when they change.

import { Cache, Unauthorized, get, setToken, token, RESOURCES } from "./api.js";
import { KINDS, parse } from "./quantity.js";
import { poolsPage } from "./pages_pools.js";
import { jobsPage, jobPage } from "./pages_jobs.js";
import { podPage } from "./pages_pod.js";
import { hostsPage, pendingPage } from "./pages_hosts.js";

const HISTORY_MS = 3600 * 1000; // the pools' chart: the last hour, kept in this tab
const SAMPLE_MS = 1000;         // the history's resolution
const RENDER_MS = 150;          // changes within this are drawn together

// Shared by the pages: the caches of the resources being watched, the pools'
// history, and what was last known of deleted pods (a preempted pod is
// deleted, and its Events still name it).
export const state = {
  caches: {},
  history: new Map(), // pool name → [{t, kinds: {cpu: {entitlement, allocation, demand}, …}}]
  podPool: new Map(), // "ns/name" → its pool's name, deleted pods included
  gone: new Map(),    // "ns/name" → the pod as it was when deleted
};

let page = null, pageArgs = [], timer = 0;

function setLive() {
  const open = Object.values(state.caches).filter((c) => c.open).length;
  const all = Object.keys(state.caches).length;
  const el = document.getElementById("live");
  el.textContent = !all ? "not connected" : open === all ? "live" : `${open}/${all} watches`;
  el.className = open === all && all ? "live ok" : "live";
  if (open === all) el.title = "watch connections: all open";
}

function schedule() {
  if (!timer) timer = setTimeout(draw, RENDER_MS);
}

function draw() {
  timer = 0;
  if (!page) return;
  const ready = page.needs.every((n) => state.caches[n] && state.caches[n].synced);
  if (!ready) return;
  page.update(...pageArgs);
}

function sample(pool, now) {
  const st = pool.status || {};
  const kinds = {};
  for (const k of KINDS)
    kinds[k] = {
      entitlement: parse((st.entitlement || {})[k]),
      allocation: parse((st.allocation || {})[k]),
      demand: parse((st.demand || {})[k]),
    };
  const name = pool.metadata.name;
  const h = state.history.get(name) || [];
  // one sample a second at most (the last of that second wins), so a pool
  // rewritten often keeps at most HISTORY_MS / 1000 of them
  if (h.length && now - h[h.length - 1].t < SAMPLE_MS) h[h.length - 1] = { t: h[h.length - 1].t, kinds };
  else h.push({ t: now, kinds });
  while (h.length && h[0].t < now - HISTORY_MS) h.shift();
  state.history.set(name, h);
}

function onChange(name) {
  return (type, obj) => {
    if (name === "pools") {
      if (type === "DELETED") state.history.delete(obj.metadata.name);
      else sample(obj, Date.now());
    }
    if (name === "pods") notePod(type, obj);
    schedule();
  };
}

function notePod(type, pod) {
  const k = `${pod.metadata.namespace}/${pod.metadata.name}`;
  const pool = (pod.metadata.labels || {})["peloton.io/resource-pool"];
  if (pool) state.podPool.set(k, pool);
  if (type === "DELETED") state.gone.set(k, pod);
  else state.gone.delete(k);
}

function onReset(name) {
  return () => {
    const c = state.caches[name];
    if (name === "pools") for (const p of c.items.values()) sample(p, Date.now());
    if (name === "pods") for (const p of c.items.values()) notePod("ADDED", p);
    schedule();
  };
}

function onState(name) {
  return (open, err) => {
    if (state.caches[name]) state.caches[name].open = open;
    setLive();
    if (err) document.getElementById("live").title = `${name}: ${err.message} (retrying)`;
  };
}

// Watches exactly what the page needs, and the pools always (their
// history). Browsers give a host six HTTP/1.1 connections, so unused
// watches are closed.
function watch(names) {
  const want = new Set(["pools", ...names]);
  for (const [n, c] of Object.entries(state.caches))
    if (!want.has(n)) {
      c.stop();
      delete state.caches[n];
    }
  for (const n of want)
    if (!state.caches[n])
      state.caches[n] = new Cache(n, {
        onChange: onChange(n), onReset: onReset(n), onState: onState(n), onAuth: askToken,
      });
  setLive();
}

function stopAll() {
  for (const c of Object.values(state.caches)) c.stop();
  state.caches = {};
  setLive();
}

const ROUTES = {
  pools: poolsPage, jobs: jobsPage, job: jobPage, pod: podPage, hosts: hostsPage, pending: pendingPage,
};

function route() {
  const parts = (location.hash.replace(/^#\/?/, "") || "pools").split("/").map(decodeURIComponent);
  const make = ROUTES[parts[0]] || poolsPage;
  const main = document.getElementById("main");
  main.replaceChildren();
  page = make(main, state);
  pageArgs = parts.slice(1);
  for (const a of document.querySelectorAll("nav a"))
    a.classList.toggle("active", a.dataset.page === (ROUTES[parts[0]] ? parts[0] : "pools").replace(/^job$/, "jobs"));
  main.dataset.page = parts[0];
  watch(page.needs);
  draw();
}

// ---- the token

function askToken(err) {
  stopAll();
  const form = document.getElementById("token-form");
  form.hidden = false;
  const e = document.getElementById("token-error");
  e.hidden = !err;
  e.textContent = err ? err.message : "";
  document.getElementById("token-input").focus();
}

// Whether the API answers with the session's token (or without one, when
// the server asks for none).
async function probe() {
  try {
    await get(RESOURCES.pools + "?limit=1");
    return null;
  } catch (e) {
    if (e instanceof Unauthorized) return e;
    return null; // another error: the watches retry and say so
  }
}

async function start() {
  const err = await probe();
  if (err) {
    askToken(token() ? err : null);
    return;
  }
  document.getElementById("token-form").hidden = true;
  route();
}

document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  setToken(document.getElementById("token-input").value.trim());
  document.getElementById("token-input").value = "";
  start();
});
document.getElementById("token-forget").addEventListener("click", () => {
  setToken("");
  askToken(null);
});
document.getElementById("token-button").addEventListener("click", () => askToken(null));
window.addEventListener("hashchange", () => {
  if (document.getElementById("token-form").hidden) route();
});
setInterval(schedule, 5000); // ages and the chart move on without changes
start();
