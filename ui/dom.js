// Building DOM without innerHTML: every string from the API becomes a text
// node, so a pod or pool name can never become markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "style") el.style.cssText = v; // CSSOM: the page's CSP allows no style attributes
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

// Replaces el's children (null, false and undefined are skipped, arrays
// flattened: the DOM's replaceChildren would write "null").
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// "3m", "2h", … since an RFC 3339 time; "" when none.
export function age(ts, now = Date.now()) {
  if (!ts) return "";
  let s = Math.max(0, Math.round((now - Date.parse(ts)) / 1000));
  if (s < 120) return s + "s";
  if ((s = Math.floor(s / 60)) < 120) return s + "m";
  if ((s = Math.floor(s / 60)) < 48) return s + "h";
  return Math.floor(s / 24) + "d";
}

export function link(href, text, attrs) {
  return h("a", { href, ...(attrs || {}) }, text);
}

export function table(head, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))), h("tbody", {}, rows));
}

// The most rows a table draws: a redraw stays bounded whatever the cluster's
// size (the rest is counted, and a filter narrows what is shown).
export const MAX_ROWS = 500;

// The first MAX_ROWS of list, and a note saying how many more there are.
export function capped(list) {
  return { rows: list.slice(0, MAX_ROWS),
    more: list.length > MAX_ROWS ? h("p", { class: "muted", "data-more": list.length - MAX_ROWS },
      `… and ${list.length - MAX_ROWS} more not drawn (the first ${MAX_ROWS} are; filter to narrow)`) : null };
}
