// One pod's timeline: created, scheduled, running, preempted, ended, each
// with the Events that explain it (the FailedScheduling Events say why it
// waited before it was scheduled, Preempted who took it and by which rule).

import { fill, h, age, table } from "./dom.js";
import { waitReason } from "./pages_jobs.js";

// Which step an Event explains, by its reason; others go by their time.
const STEP_OF = {
  FailedScheduling: "scheduled", Scheduled: "scheduled", WaitingForAdmission: "scheduled",
  Pulled: "running", Created: "running", Started: "running", BackOff: "running",
  Preempted: "preempted", Preempting: "preempted",
  Killing: "ended", NodeLost: "ended", TaskLost: "ended", Evicted: "ended", Failed: "ended",
};

function evTime(e) {
  return e.lastTimestamp || e.eventTime || e.firstTimestamp || e.metadata.creationTimestamp;
}

function steps(pod, gone, events) {
  const st = pod.status || {}, m = pod.metadata, a = m.annotations || {};
  const cs = st.containerStatuses || [];
  const sched = (st.conditions || []).find((c) => c.type === "PodScheduled");
  const started = cs.map((c) => (c.state && c.state.running && c.state.running.startedAt) ||
    (c.state && c.state.terminated && c.state.terminated.startedAt)).filter(Boolean).sort()[0] || st.startTime;
  const finished = cs.map((c) => c.state && c.state.terminated && c.state.terminated.finishedAt).filter(Boolean).sort().pop();
  const preemptEv = events.find((e) => e.reason === "Preempted");
  const ended = finished || m.deletionTimestamp || null;
  const out = [
    { step: "created", time: m.creationTimestamp, done: true },
    { step: "scheduled", time: sched && sched.status === "True" ? sched.lastTransitionTime : null,
      done: !!(sched && sched.status === "True") || !!(pod.spec && pod.spec.nodeName),
      detail: pod.spec && pod.spec.nodeName ? `on ${pod.spec.nodeName}` :
        sched && sched.status !== "True" ? `waiting: ${sched.reason || ""} ${sched.message || ""}` : "" },
    { step: "running", time: started, done: !!started || st.phase === "Running" },
    { step: "preempted", time: preemptEv ? evTime(preemptEv) : null, done: !!(a["peloton.io/preempted"] || preemptEv),
      detail: a["peloton.io/preempted"] || "", optional: true },
    { step: "ended", time: ended, done: !!ended || gone || /Succeeded|Failed/.test(st.phase || ""),
      detail: gone ? "deleted" + (st.phase ? ` (last phase ${st.phase})` : "") : st.phase === "Succeeded" ||
        st.phase === "Failed" ? st.phase + (st.reason ? `: ${st.reason}` : "") : m.deletionTimestamp ? "terminating" : "" },
  ];
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
      const events = [...state.caches.events.items.values()].filter((e) => {
        const io = e.involvedObject || {};
        return io.kind === "Pod" && io.name === name && io.namespace === ns &&
          (!io.uid || !pod.metadata.uid || io.uid === pod.metadata.uid);
      }).sort((a, b) => Date.parse(evTime(a)) - Date.parse(evTime(b)));
      const list = steps(pod, !live, events);
      const explained = new Map(list.map((s) => [s.step, []]));
      for (const e of events) {
        let step = STEP_OF[e.reason];
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
          h("li", { class: s.done ? "done" : "todo", "data-step": s.step },
            h("div", { class: "step" }, h("b", {}, s.step), " ",
              s.time ? h("span", { class: "muted" }, `${s.time} (${age(s.time, now)} ago)`) : "", " ", s.detail || ""),
            explained.get(s.step).length ? h("ul", { class: "events" }, explained.get(s.step).map((e) =>
              h("li", { class: e.type === "Warning" ? "warn" : "", "data-reason": e.reason },
                h("b", {}, e.reason), " ", e.message, e.count > 1 ? ` (×${e.count}, last ${age(evTime(e), now)} ago)` : "",
                h("span", { class: "muted" }, ` — ${(e.source || {}).component || e.reportingComponent || ""}`)))) : null))),
        h("h2", {}, "Containers"),
        table(["name", "image", "state", "restarts"], ((pod.status || {}).containerStatuses || []).map((c) =>
          h("tr", {}, h("td", {}, c.name), h("td", {}, c.image), h("td", {}, Object.keys(c.state || {})[0] || ""),
            h("td", { class: "num" }, c.restartCount || 0)))));
    },
  };
}
