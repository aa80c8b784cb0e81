// Kubernetes quantities ("500m", "4Gi", "1e3", 2) as numbers in base units
// (cores, bytes), for bars and sums; the text shown is the API's own.

const SUFFIX = {
  n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

// NaN for what is not a quantity (e.g. "unlimited").
export function parse(q) {
  if (typeof q === "number") return q;
  if (typeof q !== "string") return NaN;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(q.trim());
  if (!m) return NaN;
  return parseFloat(m[1]) * SUFFIX[m[2] || ""];
}

// A number in base units for people: cores with at most two decimals,
// bytes in binary units with three significant digits.
export function format(kind, v) {
  if (!isFinite(v)) return "—";
  if (kind === "memory" || kind === "disk") {
    const units = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i ? Number(v.toPrecision(3)) : Math.round(v)) + units[i];
  }
  return String(Math.round(v * 100) / 100);
}

// The pod's requests per Peloton kind (cpu, memory, disk, gpu), in base units:
// the sum over its containers, or the largest init container when larger.
const POD_KINDS = { cpu: "cpu", memory: "memory", "ephemeral-storage": "disk", "nvidia.com/gpu": "gpu" };

export function podRequests(pod) {
  const sum = { cpu: 0, memory: 0, disk: 0, gpu: 0 };
  const spec = pod.spec || {};
  for (const c of spec.containers || []) {
    const req = (c.resources && c.resources.requests) || {};
    for (const [name, kind] of Object.entries(POD_KINDS)) if (req[name] !== undefined) sum[kind] += parse(req[name]) || 0;
  }
  for (const c of spec.initContainers || []) {
    const req = (c.resources && c.resources.requests) || {};
    for (const [name, kind] of Object.entries(POD_KINDS))
      if (req[name] !== undefined) sum[kind] = Math.max(sum[kind], parse(req[name]) || 0);
  }
  return sum;
}

// A node's allocatable per Peloton kind, in base units.
export function nodeAllocatable(node) {
  const a = (node.status && node.status.allocatable) || {};
  const out = {};
  for (const [name, kind] of Object.entries(POD_KINDS)) out[kind] = a[name] === undefined ? 0 : parse(a[name]);
  return out;
}

export const KINDS = ["cpu", "memory", "disk", "gpu"];
