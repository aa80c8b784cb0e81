// The API as the UI sees it: requests with the session's bearer token, and
// caches of whole resources kept current by list + watch (the protocol
// kubectl and client-go follow: list, then watch from the list's
// resourceVersion; a 410 Gone or a closed stream means list again).

const TOKEN_KEY = "peloton.token";
const PAGE_LIMIT = 500; // objects per list page (continue tokens beyond)

export class Unauthorized extends Error {}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers() {
  const h = { Accept: "application/json" };
  const t = token();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

// GET path as JSON; throws Unauthorized on 401, Error with the Status's
// message on another error.
export async function get(path, signal) {
  const r = await fetch(path, { headers: headers(), signal, cache: "no-store" });
  if (r.status === 401) throw new Unauthorized("the API server refused the token (401 Unauthorized)");
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = new Error(body.message || `${r.status} ${r.statusText}`);
    e.code = r.status;
    throw e;
  }
  return body;
}

export const RESOURCES = {
  pools: "/apis/peloton.io/v1alpha1/resourcepools",
  jobs: "/apis/peloton.io/v1alpha1/jobs",
  pods: "/api/v1/pods",
  nodes: "/api/v1/nodes",
  events: "/api/v1/events",
};

export function key(obj) {
  const m = obj.metadata || {};
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}

// One resource, listed then watched, as a Map of key → object. onChange(type,
// obj, old) is called for every change after the first list, and
// onReset() after every (re)list. stop() ends it.
export class Cache {
  constructor(name, { onChange, onReset, onState, onAuth } = {}) {
    this.name = name;
    this.path = RESOURCES[name];
    this.items = new Map();
    this.synced = false;
    this.onChange = onChange || (() => {});
    this.onReset = onReset || (() => {});
    this.onState = onState || (() => {});
    this.onAuth = onAuth || (() => {});
    this.abort = new AbortController();
    this.stopped = false;
    this.run();
  }

  stop() {
    this.stopped = true;
    this.abort.abort();
  }

  async list() {
    const items = new Map();
    let cont = "", rv = "";
    do {
      const q = `?limit=${PAGE_LIMIT}` + (cont ? `&continue=${encodeURIComponent(cont)}` : "");
      const l = await get(this.path + q, this.abort.signal);
      for (const o of l.items || []) items.set(key(o), o);
      cont = (l.metadata && l.metadata.continue) || "";
      if (!rv) rv = l.metadata.resourceVersion;
    } while (cont);
    this.items = items;
    this.synced = true;
    this.onReset();
    return rv;
  }

  // Follows ?watch=1 from rv until the stream ends; returns the last
  // resourceVersion seen, or "" when the server said it is too old.
  async watch(rv) {
    const url = `${this.path}?watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(rv)}`;
    const r = await fetch(url, { headers: headers(), signal: this.abort.signal, cache: "no-store" });
    if (r.status === 401) throw new Unauthorized("the API server refused the token (401 Unauthorized)");
    if (r.status === 410) return "";
    if (!r.ok || !r.body) throw new Error(`watch ${this.name}: ${r.status}`);
    this.onState(true);
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return rv;
      buf += value;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const ev = JSON.parse(line);
        if (ev.type === "ERROR") {
          if (ev.object && ev.object.code === 410) return "";
          throw new Error(`watch ${this.name}: ${(ev.object && ev.object.message) || "error"}`);
        }
        const o = ev.object || {};
        if (o.metadata && o.metadata.resourceVersion) rv = o.metadata.resourceVersion;
        if (ev.type === "BOOKMARK") continue;
        const k = key(o), old = this.items.get(k);
        if (ev.type === "DELETED") this.items.delete(k);
        else this.items.set(k, o);
        this.onChange(ev.type, o, old);
      }
    }
  }

  async run() {
    let delay = 500;
    let rv = "";
    while (!this.stopped) {
      try {
        if (!rv) rv = await this.list();
        rv = await this.watch(rv);
        delay = 500;
      } catch (e) {
        if (this.stopped || e.name === "AbortError") return;
        this.onState(false, e);
        if (e instanceof Unauthorized) {
          this.onAuth(e);
          return;
        }
        rv = ""; // list again after an error: changes may have been missed
        await new Promise((res) => setTimeout(res, delay));
        delay = Math.min(delay * 2, 5000);
      }
    }
  }
}
