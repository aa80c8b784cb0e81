// One pod's timeline: created, queued, admitted, placed, bound, running,
// preempted, ended, each with its time and the Events that explain it (the
// FailedScheduling Events say why it waited at its step, Preempted who
// took it and by which rule, the pool's Preempting for whom).

import { fill, h, age, table } from "./dom.js";
import { waitReason } from "./pages_jobs.js";

// Which step an Event explains, by its reason (FailedScheduling by its
// message: the resource manager's waits are before admission, placement's
// before placing); others go by their time.
const STEP_OF = {
  WaitingForAdmission: "admitted", Scheduled: "bound",
  Pulled: "running", Created: "running", Started: "running", BackOff: "running",
  Preempted: "preempted", Preempting: "preempted",
  Killing: "ended", NodeLost: "ended", TaskLost: "ended", Evicted: "ended", Failed: "ended",
};

function stepOf(e) {
  if (e.reason !== "FailedScheduling") return STEP_OF[e.reason];
  const m = e.message || "";
  if (/^waiting for admission/.test(m)) return "admitted";
  // WaitingForGang ("gang g8: 5/8 members, ...") and WaitingForPool ("resource pool \"x\" not found") wait to queue
  if (/^gang \S+: \d+\/\d+ members/.test(m) || /^resource pool /.test(m)) return "queued";
  return "placed"; // placement's "0/5 nodes are available: ..."
}

function evTime(e) {
  return e.lastTimestamp || e.eventTime || e.firstTimestamp || e.metadata.creationTimestamp;
}

// The pool that gained from an inter-pool preemption: the Preempting
// Events on ResourcePools that name the victim's pool (its path in the
// rule, "pool /org/team-a over cpu entitlement ..."), near the preemption.
function gainers(rule, at, allEvents) {
  const m = /^pool (\S+) over /.exec(rule || "");
  if (!m) return [];
  const t = Date.parse(at) || 0;
  return allEvents.filter((e) => (e.involvedObject || {}).kind === "ResourcePool" && e.reason === "Preempting" &&
    (e.message || "").includes(`of pool ${m[1]},`) && (!t || Math.abs((Date.parse(evTime(e)) || 0) - t) < 60000));
}

// The steps of a pod's way, each with its time and a word on it:
//   queued     peloton.io/queued-at (its gang entered its pool's admission
//              queue), or PodScheduled=False WaitingForAdmission; while
//              WaitingForGang or WaitingForPool it waits here
//   admitted   peloton.io/admitted-at (the resource manager admitted the gang)
//   placed     peloton.io/placed-at (placement chose its node)
//   bound      PodScheduled=True and spec.nodeName (the Binding stored)
//   running    the containers' startedAt or status.startTime
//   preempted  peloton.io/preempted(-at), the Preempted Event
//   ended      finishedAt, the deletion
// The first three come with the Binding (the API server copies its
// annotations onto the pod), so a pod waiting shows where it waits by its
// PodScheduled condition.
function steps(pod, gone, events, allEvents) {
  const st = pod.status || {}, m = pod.metadata, a = m.annotations || {};
  const cs = st.containerStatuses || [];
  const sched = (st.conditions || []).find((c) => c.type === "PodScheduled");
  const waiting = sched && sched.status !== "True" ? sched.reason || "" : "";
  const bound = !!(sched && sched.status === "True") || !!(pod.spec && pod.spec.nodeName);
  const started = cs.map((c) => (c.state && c.state.running && c.state.running.startedAt) ||
    (c.state && c.state.terminated && c.state.terminated.startedAt)).filter(Boolean).sort()[0] || st.startTime;
  const finished = cs.map((c) => c.state && c.state.terminated && c.state.terminated.finishedAt).filter(Boolean).sort().pop();
  const preemptEv = events.find((e) => e.reason === "Preempted");
  const rule = a["peloton.io/preempted"] || (preemptEv ? preemptEv.message : "");
  const preemptedAt = a["peloton.io/preempted-at"] || (preemptEv ? evTime(preemptEv) : null);
  const ended = finished || m.deletionTimestamp || null;
  const pool = (m.labels || {})["peloton.io/resource-pool"];
  const waitMsg = waiting ? `waiting: ${waiting} ${sched.message || ""}` : "";
  let by = "";
  if (rule) {
    const g = /^priority \d+ gang (\S+) preempts/.exec(rule);
    const gain = [...new Set(gainers(rule, preemptedAt, allEvents).map((e) => e.involvedObject.name))];
    const src = preemptEv ? (preemptEv.source || {}).component || preemptEv.reportingComponent || "" : "";
    by = `by ${src || "the resource manager"}` + (g ? ` for gang ${g[1]} (intra-pool, priority)` :
      gain.length ? ` for pool ${gain.join(", ")} (inter-pool)` : "") + `: ${rule}`;
  }
  const out = [
    { step: "created", time: m.creationTimestamp, done: true },
    { step: "queued", time: a["peloton.io/queued-at"] || (waiting === "WaitingForAdmission" ? sched.lastTransitionTime : null),
      done: !!a["peloton.io/queued-at"] || waiting === "WaitingForAdmission" || bound,
      detail: pool ? `on pool ${pool}` : "", wait: /^WaitingFor(Gang|Pool)$/.test(waiting) ? waitMsg : "" },
    { step: "admitted", time: a["peloton.io/admitted-at"] || null,
      done: !!a["peloton.io/admitted-at"] || waiting === "Unschedulable" || bound,
      wait: waiting === "WaitingForAdmission" ? waitMsg : "" },
    { step: "placed", time: a["peloton.io/placed-at"] || null, done: !!a["peloton.io/placed-at"] || bound,
      wait: waiting === "Unschedulable" ? waitMsg : "" },
    { step: "bound", time: sched && sched.status === "True" ? sched.lastTransitionTime : null, done: bound,
      detail: pod.spec && pod.spec.nodeName ? `on ${pod.spec.nodeName}` : "" },
    { step: "running", time: started, done: !!started || st.phase === "Running" },
    { step: "preempted", time: preemptedAt, done: !!rule, detail: by, rule, optional: true },
    { step: "ended", time: ended, done: !!ended || gone || /Succeeded|Failed/.test(st.phase || ""),
      detail: gone ? "deleted" + (st.phase ? ` (last phase ${st.phase})` : "") : st.phase === "Succeeded" ||
        st.phase === "Failed" ? st.phase + (st.reason ? `: ${st.reason}` : "") : m.deletionTimestamp ? "terminating" : "" },
  ];
  for (const s of out) if (!s.done && s.wait) s.detail = s.wait;
  return out.filter((s) => !s.optional || s.done);
}

export function podPage(main, state) {
  const body = h("div", {});
  main.append(body);
  return {
    needs: ["pods", "events"],
    update(ns, name) {
      const k = `${ns}/${name}`;
      const live = state.caches.pods.items.get(k);
      const pod = live || state.gone.get(k);
      const now = Date.now();
      if (!pod) {
        fill(body, h("h1", {}, `Pod ${k}`), h("p", { class: "muted" }, "No such pod (or it was deleted before this page saw it)."));
        return;
      }
      const all = [...state.caches.events.items.values()];
      const events = all.filter((e) => {
        const io = e.involvedObject || {};
        return io.kind === "Pod" && io.name === name && io.namespace === ns &&
          (!io.uid || !pod.metadata.uid || io.uid === pod.metadata.uid);
      }).sort((a, b) => Date.parse(evTime(a)) - Date.parse(evTime(b)));
      const list = steps(pod, !live, events, all);
      const explained = new Map(list.map((s) => [s.step, []]));
      const pre = list.find((s) => s.step === "preempted");
      if (pre) for (const e of gainers(pre.rule, pre.time, all)) explained.get("preempted").push(e);
      for (const e of events) {
        let step = stepOf(e);
        if (!explained.has(step)) { // by time: the last step reached before it
          step = "created";
          for (const s of list) if (s.done && s.time && Date.parse(s.time) <= Date.parse(evTime(e))) step = s.step;
        }
        explained.get(step).push(e);
      }
      const labels = pod.metadata.labels || {}, w = waitReason(pod);
      fill(body, 
        h("h1", {}, `Pod ${k}`),
        h("p", {}, "pool ", h("b", {}, labels["peloton.io/resource-pool"] || "—"),
          labels["peloton.io/job"] ? [", job ", h("a", { href: `#/job/${ns}/${labels["peloton.io/job"]}` },
            labels["peloton.io/job"]), ` instance ${labels["peloton.io/instance"] || "?"}`] : "",
          ", phase ", h("b", { "data-field": "phase" }, live ? (pod.status || {}).phase || "" : "deleted"),
          w ? h("span", { class: "warn" }, ` — waiting: ${w.reason || ""} ${w.message || ""}`) : ""),
        h("ol", { class: "timeline" }, list.map((s) =>
          h("li", { class: s.done ? "done" : "todo", "data-step": s.step, "data-time": s.time || "" },
            h("div", { class: "step" }, h("b", {}, s.step), " ",
              s.time ? h("span", { class: "muted" }, `${s.time} (${age(s.time, now)} ago)`) : "", " ", s.detail || ""),
            explained.get(s.step).length ? h("ul", { class: "events" }, explained.get(s.step).map((e) =>
              h("li", { class: e.type === "Warning" ? "warn" : "", "data-reason": e.reason },
                h("b", {}, e.reason), " ",
                (e.involvedObject || {}).kind === "ResourcePool" ? `pool ${e.involvedObject.name}: ` : "", e.message, e.count > 1 ? ` (×${e.count}, last ${age(evTime(e), now)} ago)` : "",
                h("span", { class: "muted" }, ` — ${(e.source || {}).component || e.reportingComponent || ""}`)))) : null))),
        h("h2", {}, "Containers"),
        table(["name", "image", "state", "restarts"], ((pod.status || {}).containerStatuses || []).map((c) =>
          h("tr", {}, h("td", {}, c.name), h("td", {}, c.image), h("td", {}, Object.keys(c.state || {})[0] || ""),
            h("td", { class: "num" }, c.restartCount || 0)))));
    },
  };
}
