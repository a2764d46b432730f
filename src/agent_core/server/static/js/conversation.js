// The conversation as stored: the root agent's active path, replies rendered as Markdown, reasoning
// folded, tool calls as folded cards with their results, child agents nested (and folded) under the call
// that started them. The followed run's live items (live.js) follow the stored ones.

import { $, clear, duration, el, num, reasoningOf, short, textOf } from "./dom.js";
import { markdownBlock } from "./markdown.js";
import { mediaOf } from "./format.js";
import { nestIn, outcomeOf, toolCard } from "./toolcard.js";
import { readEvents } from "./api.js";
import { LIVE_STATUSES, activePath, rootAgentId, state } from "./store.js";

// ---- pieces shared with the live view -----------------------------------------------------------------

export function reasoningBox(text) {
  const body = el("div", { class: "reasoning-text" }, text || "");
  const box = el("details", { class: "reasoning" }, el("summary", {}, "reasoning"), body);
  box.textNode = body;
  return box;
}

export function userBubble(text, extra) {
  return el("div", { class: "msg user" }, el("span", { class: "who" }, "you"), el("div", { class: "text" }, text), extra);
}

// An assistant reply: `.md` holds the rendered Markdown; `meta` a muted line of figures under it.
export function assistantBubble(text, { who = "assistant", cls = "", nodeId } = {}) {
  const body = markdownBlock(text);
  const bubble = el("div", { class: `msg assistant ${cls}`.trim(), "data-node": nodeId }, el("span", { class: "who" }, who), body);
  bubble.body = body;
  return bubble;
}

export function kindLabel(type, purpose) {
  const kind = type || "child";
  return purpose && purpose !== kind ? `${kind} ${purpose}` : kind;
}

function addressChips(node) {
  const workers = node.metadata?.addressed_workers;
  if (!Array.isArray(workers) || !workers.length) return null;
  return el("span", { class: "chips" }, workers.map((w) => el("span", { class: "chip" }, `→ @${w.worker_agent_id}`)));
}

// The figures of a stored reply: model, tokens, latency.
function replyMeta(node) {
  const m = node.metadata || {};
  const u = m.usage || {};
  const parts = [];
  if (m.model) parts.push(String(m.model));
  if (typeof u.input_tokens === "number") parts.push(`${num(u.input_tokens)} → ${num(u.output_tokens)} tokens${u.cache_read_tokens ? ` (${num(u.cache_read_tokens)} from cache)` : ""}`);
  if (typeof m.latency_ms === "number") parts.push(duration(m.latency_ms));
  if (m.retry?.attempts > 1) parts.push(`${m.retry.attempts - 1} retr${m.retry.attempts === 2 ? "y" : "ies"}`);
  return parts.length ? el("div", { class: "msg-meta muted" }, parts.join(" · ")) : null;
}

// ---- child agents ------------------------------------------------------------------------------------

// Child runs of the session by the agent-tool call that started them: callId -> [{runId, summary, worker}].
export function childRunsByCall(replay) {
  const summaries = new Map((replay.children || []).map((c) => [c.child_run_id, c]));
  const byCall = new Map();
  const seen = new Map();
  for (const ev of replay.events || []) {
    if (ev.event_type !== "child_agent_created" && ev.event_type !== "worker_dispatched") continue;
    const runId = ev.payload?.child_run_id;
    const callId = ev.tool_call_id || ev.payload?.tool_call_id;
    if (!runId || !callId) continue;
    if (seen.has(runId)) {  // a worker's first dispatch: child_agent_created, then worker_dispatched
      seen.get(runId).worker ||= ev.payload.worker_agent_id;
      continue;
    }
    const child = { runId, summary: summaries.get(runId), worker: ev.payload.worker_agent_id };
    seen.set(runId, child);
    byCall.set(callId, [...(byCall.get(callId) || []), child]);
  }
  return byCall;
}

let replayHandler = null;  // live.js registers the event handler the child replays use
export function setReplayHandler(fn) { replayHandler = fn; }

// A finished child run's own activity (its events, grandchildren nested), replayed from its event stream
// once and cached.
export function childActivity(runId, container) {
  const replayInto = (events) => {
    const box = $("conversation");
    const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    const pseudo = { runId, tools: {}, lanes: {}, quiet: true };
    pseudo.root = { bubble: null, child: true, append: (node) => container.append(node) };
    for (const ev of events) replayHandler?.(pseudo, ev);
    if (atEnd) box.scrollTop = box.scrollHeight;  // the reader was at the end: stay there
  };
  const cached = state.childEvents.get(runId);
  if (cached) { replayInto(cached); return; }
  const events = [];
  readEvents(runId, false, (ev) => events.push(ev))
    .then(() => { state.childEvents.set(runId, events); replayInto(events); })
    .catch((err) => container.append(el("p", { class: "error" }, `child events: ${err.message}`)));
}

export function childHead(label, runId, status) {
  return el("div", { class: "child-head", "data-run": runId },
    el("span", { class: "child-kind" }, `↳ ${label}`), el("span", { class: "muted" }, ` · run ${short(runId, 40)}`),
    status ? el("span", { class: `child-status ${status}` }, status) : null);
}

// A stored child run under its call: its head, its activity (shown for children seen live, one click away
// for the others), its outcome.
function renderChild(child, nest) {
  const c = child.summary || {};
  const label = child.worker ? `worker @${child.worker}` : kindLabel(c.agent_type, c.purpose);
  const head = childHead(label, child.runId, c.status);
  const activity = el("div", { class: "child-activity", "data-run": child.runId });
  nest.append(head, activity);
  const terminal = c.status && !LIVE_STATUSES.has(c.status);
  const toggle = el("button", { type: "button", class: "show-activity" }, "show activity");
  let shown = false;
  const show = () => { shown = true; toggle.textContent = "hide activity"; activity.hidden = false; if (!activity.childElementCount) childActivity(child.runId, activity); };
  toggle.addEventListener("click", () => {
    if (shown) { shown = false; activity.hidden = true; toggle.textContent = "show activity"; state.expanded.delete(child.runId); }
    else { state.expanded.add(child.runId); show(); }
  });
  if (terminal) head.append(toggle);
  if (terminal && state.expanded.has(child.runId)) show();
  nest.append(el("div", { class: "child-head child-result" }, `↳ ${c.status || "…"}${c.result_summary ? ": " + short(c.result_summary, 300) : ""}`));
}

// ---- the stored conversation -----------------------------------------------------------------------------

// Every call's outcome in the stored events: callId -> terminal event.
function outcomes(replay) {
  const out = new Map();
  for (const ev of replay.events || []) {
    if (ev.tool_call_id && ["tool_completed", "tool_failed", "tool_denied"].includes(ev.event_type)) out.set(ev.tool_call_id, ev);
  }
  return out;
}

export function renderNodes(nodes, box, replay) {
  const byCall = childRunsByCall(replay);
  const ended = outcomes(replay);
  const cards = new Map();
  for (const node of nodes) {
    if (node.role === "user" && node.node_type === "message") {
      const bubble = userBubble(textOf(node.content), [mediaOf(node.content), addressChips(node)]);
      bubble.dataset.node = node.node_id;
      box.append(bubble);
    } else if (node.role === "assistant") {
      const reasoning = reasoningOf(node.content);
      if (reasoning) box.append(reasoningBox(reasoning));
      const text = textOf(node.content);
      if (text) {
        const bubble = assistantBubble(text, { cls: node.metadata?.partial ? "partial" : "", nodeId: node.node_id });
        const meta = replyMeta(node);
        if (meta) bubble.append(meta);
        box.append(bubble);
      }
      for (const block of node.content || []) {
        if (block.type !== "tool_call") continue;
        const card = toolCard({ name: block.name, args: block.arguments, callId: block.tool_call_id });
        const end = ended.get(block.tool_call_id);
        if (end) card.setStatus(...outcomeOf(end));
        cards.set(block.tool_call_id, card);
        box.append(card);
        for (const child of byCall.get(block.tool_call_id) || []) renderChild(child, nestIn(card));
      }
    } else if (node.role === "tool") {
      for (const block of node.content || []) {
        if (block.type !== "tool_result") continue;
        const card = cards.get(block.tool_call_id);
        if (card) {
          card.setResult(block);
          if (card.dataset.status === "running") card.setStatus(block.is_error ? "failed" : "ok");
        } else {
          const orphan = toolCard({ name: "result", args: {}, callId: block.tool_call_id });
          orphan.setResult(block);
          orphan.setStatus(block.is_error ? "failed" : "ok");
          box.append(orphan);
        }
      }
    } else if (node.node_type === "compaction") {
      box.append(el("div", { class: "notice" }, "[earlier conversation compacted into a summary]"));
    } else if (node.role === "system") {
      box.append(el("div", { class: "notice" }, `[${node.node_type}]`));
    }
  }
}

export function renderConversation() {
  const box = clear($("conversation"));
  if (!state.replay) {
    box.append(el("div", { class: "empty" }, state.newSession
      ? "New session: type the first message below."
      : "Select a session, or start a new one."));
    return;
  }
  const root = rootAgentId(state.replay);
  const path = activePath(state.replay).filter((node) => !root || node.agent_id === root);
  renderNodes(path, box, state.replay);
  if (state.live && !state.live.done && state.live.sessionId === state.sessionId) {
    for (const item of state.live.items) box.append(item);
  }
  box.scrollTop = box.scrollHeight;
}

// Appends a live item of the followed run (kept, so a redraw shows it again).
export function liveAppend(node) {
  state.live.items.push(node);
  if (state.view === "conversation" && state.live.sessionId === state.sessionId) {
    const box = $("conversation");
    const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    box.append(node);
    if (atEnd) box.scrollTop = box.scrollHeight;
  }
}
