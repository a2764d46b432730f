// The followed run's state above the composer: a chip (queued, waiting for the model, reasoning, streaming, running
// a tool, awaiting approval, then how it ended) and a line of figures (the model and prompt size with the
// seconds waited, the output rate, the tool and its seconds); the Stop button beside it.

import { $, cost, duration, num } from "./dom.js";

const LABEL = {
  starting: "starting", queued: "queued", waiting: "waiting for the model", thinking: "reasoning", streaming: "streaming",
  tool: "running a tool", approval: "awaiting approval", question: "awaiting your answer",
  completed: "completed", cancelled: "cancelled", failed: "failed", aborted: "stopped",
};

let timer = null;
let run = { kind: "", text: "", since: 0 };  // the run's own state; text: a string or f(seconds)
let user = null;                             // a request waiting for the user, shown over it: {kind, text}

function paint() {
  const shown = user || { kind: run.kind, text: typeof run.text === "function" ? run.text(Math.floor((Date.now() - run.since) / 1000)) : run.text };
  const chip = $("run-state");
  chip.hidden = !shown.kind;
  chip.dataset.state = shown.kind || "";
  chip.textContent = LABEL[shown.kind] || shown.kind || "";
  $("run-status").textContent = shown.text || "";
}

// Shows the run's state; `text` is a string or a function of the seconds since the state began (redrawn
// each second). A request waiting for the user stays in front until it is answered.
export function showState(kind, text) {
  clearInterval(timer);
  timer = typeof text === "function" ? setInterval(paint, 1000) : null;
  run = { kind, text, since: Date.now() };
  paint();
}

// A pending approval or question of the followed run: shown over the run's state until it is answered.
export function showWaitingForUser(kind, text) {
  user = { kind, text };
  paint();
}

export function resumeAfterUser() {
  if (!user) return;
  user = null;
  paint();
}

// The end of a run: how it ended, its turns, time, tokens and cost (from run_completed / run_cancelled).
export function showEnded(ev, startedAt) {
  const p = ev.payload || {};
  const kind = ev.event_type === "run_cancelled" ? "cancelled"
    : ev.event_type === "loop_failed" ? "failed"
    : p.end_reason && p.end_reason !== "completed" ? "aborted" : "completed";
  const parts = [];
  if (p.end_reason && p.end_reason !== "completed") parts.push(String(p.end_reason).replace(/_/g, " "));
  if (typeof p.turn_count === "number") parts.push(`${p.turn_count} turn${p.turn_count === 1 ? "" : "s"}`);
  if (startedAt) parts.push(duration(Date.now() - startedAt));
  const u = p.usage;
  if (u) parts.push(`${num(u.input_tokens)} in · ${num(u.output_tokens)} out${u.cache_read_tokens ? ` · ${num(u.cache_read_tokens)} cache read` : ""}`);
  if (u && typeof u.cost_usd === "number") parts.push(cost(u.cost_usd));
  showState(kind, parts.join(" · "));
}

export function clearState() { showState("", ""); }
