// The followed run, live: its event stream turned into the conversation (replies streaming as Markdown,
// tool cards, child agents nested under their call) and into the run state above the composer; sending a
// message and stopping a run.

import { $, el, errorText, num } from "./dom.js";
import { api, features, readEvents } from "./api.js";
import { markdownFragment, renderInto } from "./markdown.js";
import { nestIn, outcomeOf, toolCard } from "./toolcard.js";
import { assistantBubble, childHead, kindLabel, liveAppend, reasoningBox, renderConversation, setReplayHandler, userBubble } from "./conversation.js";
import { clearState, showEnded, showState } from "./runstate.js";
import { TERMINAL, render, state } from "./store.js";

const hooks = { afterRun: async () => {}, sessionsChanged: () => {}, onPoolsChange: () => {}, onApprovalsChange: () => {} };
export function setLiveHooks(more) { Object.assign(hooks, more); }

// Where a run's live activity goes: the conversation for the followed run, the nested box under the
// parent's agent-tool call for a child run (grandchildren nest under their parent's call in turn).
function laneFor(live, ev) {
  if (ev.run_id === live.runId || !ev.parent_run_id) return live.root;
  let lane = live.lanes[ev.run_id];
  if (!lane) {
    const host = live.tools[ev.parent_tool_call_id];
    const target = host ? nestIn(host) : null;
    lane = { bubble: null, child: true, append: (node) => (target ? target.append(node) : live.root.append(node)) };
    live.lanes[ev.run_id] = lane;
  }
  return lane;
}

function finishBubble(lane, text) {
  const body = lane.bubble.body;
  clearTimeout(body.renderTimer);
  body.renderTimer = null;
  body.replaceChildren(markdownFragment(text));
  lane.bubble.classList.remove("streaming");
}

// The status line while the reply streams: output so far (≈ 4 characters a token) and its rate.
function drawStreaming(live) {
  if (live.quiet || state.live !== live || !live.stream) return;
  const s = live.stream;
  const now = Date.now();
  if (now - (s.drawn || 0) < 250) return;
  s.drawn = now;
  const tokens = Math.max(1, Math.round((s.chars + s.reasoning) / 4));
  const seconds = Math.max(0.001, (now - s.started) / 1000);
  const what = s.thinking ? `${s.model} is reasoning` : s.model;
  showState(s.thinking ? "thinking" : "streaming", `${what} · ≈${num(tokens)} tokens · ${(tokens / seconds).toFixed(1)} tokens/s · first token after ${(s.waited / 1000).toFixed(1)} s`);
}

// Counts streamed output of the followed run; `thinking` says whether it is reasoning or the answer (a
// switch between the two is drawn at once).
function countStreamed(live, text, thinking) {
  const s = live.stream;
  if (!s) return;
  if (thinking) s.reasoning += text.length; else s.chars += text.length;
  if (s.thinking !== thinking) { s.thinking = thinking; s.drawn = 0; }
  drawStreaming(live);
}

// The followed run's model call, from the same model_progress events as the CLI's status line: while the
// model reads the prompt, the prompt size and the seconds waited; once the answer is complete its output
// rate goes under the reply.
function showModelProgress(live, lane, p) {
  const model = String(p.model || "the model");
  if (p.phase === "waiting") {
    live.stream = null;
    const tokens = typeof p.prompt_tokens === "number" ? `${num(p.prompt_tokens)} prompt tokens` : "the prompt";
    if (!live.quiet) showState("waiting", (s) => `waiting for ${model} · ${tokens} · ${s} s`);
  } else if (p.phase === "streaming") {
    live.stream = { model, started: Date.now(), chars: 0, reasoning: 0, thinking: false, waited: p.waited_ms || 0 };
    if (!live.quiet) showState("streaming", `${model} is answering (first token after ${((p.waited_ms || 0) / 1000).toFixed(1)} s)`);
  } else if (p.phase === "done" && p.stop_reason !== "max_tokens") {
    live.stream = null;
    const rate = typeof p.tokens_per_second === "number" ? ` at ${p.tokens_per_second.toFixed(1)} tokens/s` : "";
    const line = `${p.output_tokens ?? "?"} tokens${rate} · first token after ${((p.waited_ms || 0) / 1000).toFixed(1)} s`;
    if (lane.answered) lane.answered.append(el("div", { class: "rate muted" }, line));
    if (!live.quiet) showState("working", line);
  }
}

export function handleLiveEvent(live, ev) {
  const p = ev.payload || {};
  const child = ev.run_id !== live.runId;
  const lane = laneFor(live, ev);
  const bubble = (cls) => {
    lane.bubble = assistantBubble("", { who: lane.child ? "child agent" : "assistant", cls });
    lane.text = "";
    lane.append(lane.bubble);
  };
  switch (ev.event_type) {
    case "reasoning_delta":
      if (!lane.reasoning) { lane.reasoning = reasoningBox(""); lane.append(lane.reasoning); }
      lane.reasoning.textNode.append(String(p.text || ""));
      if (!child) countStreamed(live, String(p.text || ""), true);
      break;
    case "message_delta":
      lane.reasoning = null;
      if (!lane.bubble) bubble("streaming");
      lane.text += String(p.text || "");
      renderInto(lane.bubble.body, lane.text);
      if (!child) countStreamed(live, String(p.text || ""), false);
      break;
    case "message_completed":
      lane.reasoning = null;
      if (p.role === "assistant" || p.role === undefined) {
        if (!lane.bubble && p.text) bubble("");
        if (lane.bubble) finishBubble(lane, String(p.text || lane.text));
        lane.answered = lane.bubble;
        lane.bubble = null;
      }
      break;
    case "model_progress":
      if (!child) showModelProgress(live, lane, p);
      return;
    case "tool_started": {
      const card = toolCard({ name: p.tool_name, args: p.args_summary, callId: ev.tool_call_id, child });
      live.tools[ev.tool_call_id] = card;
      lane.append(card);
      if (!child && !live.quiet) showState("tool", (s) => `running ${p.tool_name} · ${s} s`);
      break;
    }
    case "tool_completed":
    case "tool_failed":
    case "tool_denied": {
      let card = live.tools[ev.tool_call_id];
      if (!card) { card = toolCard({ name: p.tool_name, args: "", callId: ev.tool_call_id, child }); lane.append(card); }
      card.setStatus(...outcomeOf(ev));
      if (ev.event_type === "tool_completed") card.setLive({ summary: p.summary, artifact_ids: p.artifact_ids });
      if (!child && !live.quiet) showState("working", `${p.tool_name} ${ev.event_type.replace("tool_", "")}`);
      break;
    }
    case "child_agent_created":
    case "worker_dispatched": {
      if (p.child_run_id) state.expanded.add(p.child_run_id);
      const host = live.tools[ev.tool_call_id || p.tool_call_id];
      const label = ev.event_type === "worker_dispatched" ? `worker @${p.worker_agent_id} (${p.worker_pool_id})` : kindLabel(p.agent_type, p.purpose);
      const head = childHead(label, p.child_run_id, "running");
      if (host) nestIn(host).append(head); else lane.append(head);
      if (ev.event_type === "worker_dispatched") hooks.onPoolsChange();
      break;
    }
    case "child_agent_completed":
    case "child_agent_failed":
    case "child_agent_cancelled": {
      const host = live.tools[ev.tool_call_id || p.tool_call_id];
      const status = p.status || ev.event_type.replace("child_agent_", "");
      const line = el("div", { class: "child-head child-result" }, `↳ ${status} · run ${p.child_run_id}`);
      if (host) {
        for (const s of nestIn(host).querySelectorAll(`.child-head[data-run="${CSS.escape(p.child_run_id || "")}"] .child-status`)) { s.textContent = status; s.className = `child-status ${status}`; }
        nestIn(host).append(line);
      } else lane.append(line);
      hooks.onPoolsChange();
      break;
    }
    case "run_queued":
      lane.append(el("div", { class: "notice" }, `[queued, position ${p.queue_position}]`));
      if (!child && !live.quiet) showState("queued", `position ${p.queue_position}: another run of this session goes first`);
      break;
    case "run_dequeued":
      if (!child && !live.quiet) showState("starting", p.reason === "cancelled" ? "cancelled while queued" : "starting");
      break;
    case "model_fallback":
      lane.append(el("div", { class: "notice" }, `[${p.from_model} failed: continuing with ${p.to_model}]`));
      break;
    case "error":
      lane.append(el("div", { class: "notice error" }, `error ${errorText(p)}`));
      break;
    default:
      break;
  }
  if (live.quiet || child) return;
  if (TERMINAL.has(ev.event_type)) showEnded(ev, live.startedAt);
  if (state.view === "conversation") {
    const box = $("conversation");
    if (box.scrollHeight - box.scrollTop - box.clientHeight < 160) box.scrollTop = box.scrollHeight;
  }
}

setReplayHandler(handleLiveEvent);

export function stopLive() {
  if (state.live) state.live.abort.abort();
  state.live = null;
  $("cancel-run").hidden = true;
}

export async function followRun(runId, sessionId) {
  stopLive();
  const live = { runId, sessionId, abort: new AbortController(), tools: {}, lanes: {}, items: [], startedAt: Date.now() };
  live.root = { bubble: null, child: false, append: liveAppend };
  state.live = live;
  $("cancel-run").hidden = false;
  showState("starting", "starting");
  renderConversation();
  hooks.onApprovalsChange();
  try {
    await readEvents(runId, false, (ev) => { if (state.live === live) handleLiveEvent(live, ev); }, live.abort.signal);
  } catch (err) {
    if (live.abort.signal.aborted) return;
    showState("failed", String(err.message || err));
  }
  if (state.live !== live) return;
  live.done = true;  // the stored session replaces the live items; state.live clears once it is shown
  $("cancel-run").hidden = true;
  await hooks.afterRun(sessionId);
  if (state.live === live) state.live = null;
  hooks.onApprovalsChange();
}

export async function cancelRun() {
  if (!state.live || state.live.done) return;
  $("cancel-run").disabled = true;
  showState("starting", "stopping…");  // the run's terminal event says how it ended
  try {
    await api("POST", `/api/runs/${encodeURIComponent(state.live.runId)}/cancel`);
  } catch (err) {
    showState("failed", `not stopped: ${err.message}`);
  } finally {
    $("cancel-run").disabled = false;
  }
}

export async function send(event) {
  event?.preventDefault();
  const box = $("message");
  const message = box.value;
  if (!message.trim()) return;
  const body = { message };
  if (state.sessionId && !state.newSession) body.session_id = state.sessionId;
  else body.mode = $("new-mode").value;
  const mode = $("permission-mode");
  if (features.permissionModes.length && mode.value) body.permission_mode = mode.value;
  $("send").disabled = true;
  try {
    if (body.session_id) {  // the path as stored now (an earlier run's stream may have been cut short)
      state.replay = await api("GET", `/api/sessions/${encodeURIComponent(state.sessionId)}`);
    }
    const created = await api("POST", "/api/runs", body);
    state.lastRunId = created.run_id;
    box.value = "";
    state.newSession = false;
    if (state.sessionId !== created.session_id) {  // a new session: nothing to replay yet
      state.sessionId = created.session_id;
      history.replaceState(null, "", `#${created.session_id}`);
      state.replay = { session_id: created.session_id, runs: [], nodes: [], events: [], children: [], tasks: [], active_node_id: null };
      render();
      hooks.sessionsChanged();
    }
    const pending = userBubble(message);
    followRun(created.run_id, created.session_id);
    liveAppend(pending);
  } catch (err) {
    clearState();
    showState("failed", `not sent: ${err.message}`);
  } finally {
    $("send").disabled = false;
  }
}
