// soong-agent serve web UI: plain JavaScript, no build step, no external assets.
// Safety rule: every string that comes from the model, a tool, a file or storage is inserted as text
// (text nodes / textContent). This file never assigns innerHTML, outerHTML or insertAdjacentHTML.
"use strict";

const DEBUG_ONLY = new Set((
  "context_built prompt_cache_break model_started model_text_delta tool_call_delta model_completed provider_debug " +
  "permission_failed hook_started hook_completed hook_failed child_agent_cancel_requested " +
  "child_agent_cancel_timeout child_result_schema_validation_failed compact_pending compact_started " +
  "compact_completed compact_failed memory_extraction_started memory_extraction_completed " +
  "memory_extraction_failed mcp_server_failed").split(" "));
const TERMINAL = new Set(["run_completed", "run_cancelled", "loop_failed"]);
const LIVE_STATUSES = new Set(["queued", "pending", "running"]);

const state = {
  sessions: [],
  sessionId: null,
  replay: null,
  view: "conversation",
  debug: false,
  live: null,        // {runId, sessionId, abort, bubble, text}
  approvals: new Map(),  // request_id -> pending approval (pushed)
  questions: new Map(),  // request_id -> pending question of internal.ask_user (pushed)
  pools: null,
  team: null,        // {session_id, teammates} of the selected session (GET /api/sessions/{id}/team)
  expanded: new Set(),     // child run ids whose activity the conversation shows
  childEvents: new Map(),  // child run id -> its replayed events (finished children only)
  newSession: false,
};

// ---- DOM helpers -------------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (id) => document.getElementById(id);
const clear = (node) => { while (node.firstChild) node.removeChild(node.firstChild); return node; };
const short = (text, n) => { const s = String(text ?? ""); return s.length > n ? s.slice(0, n - 1) + "…" : s; };
const time = (iso) => { try { return new Date(iso).toLocaleTimeString(); } catch { return String(iso); } };

function textOf(blocks) {
  return (blocks || []).filter((b) => b.type === "text").map((b) => b.text).join("");
}

function reasoningOf(blocks) {
  return (blocks || []).filter((b) => b.type === "reasoning" && b.text).map((b) => b.text).join("\n\n");
}

// The model's reasoning, collapsed (a <details> the user opens); the text goes in as text.
function reasoningBox(text) {
  const body = document.createTextNode(text || "");
  const box = el("details", { class: "reasoning" }, el("summary", {}, "reasoning"), el("div", { class: "reasoning-text" }, body));
  box.textNode = body;
  return box;
}

// Images and PDFs of a message or a tool result: served by /api/artifacts/{id} (same origin, cookie).
function mediaOf(blocks) {
  const out = [];
  for (const b of blocks || []) {
    const id = encodeURIComponent(String(b.artifact_id || ""));
    if (b.type === "image") out.push(el("img", { class: "attachment", src: `/api/artifacts/${id}`, alt: `image ${b.artifact_id}` }));
    else if (b.type === "document") out.push(el("a", { class: "attachment", href: `/api/artifacts/${id}`, target: "_blank", rel: "noopener" }, `document ${b.artifact_id}`));
    else if (b.type === "tool_result") out.push(...mediaOf(b.content));
  }
  return out;
}

function resultText(blocks) {
  return (blocks || []).map((b) => b.type === "text" ? b.text
    : b.type === "json" ? (b.summary || JSON.stringify(b.data))
    : b.type === "artifact_ref" ? `[artifact ${b.artifact_id}] ${b.summary || ""}` : "").join(" ");
}

// Input is split into its uncached part and what the provider's prompt cache read and wrote.
function usageText(u) {
  if (!u) return "";
  const parts = [];
  if (u.input_tokens !== undefined) {
    const split = [];
    if (u.cache_read_tokens || u.cache_write_tokens) {
      const uncached = u.uncached_input_tokens ??
        Math.max(0, u.input_tokens - (u.cache_read_tokens || 0) - (u.cache_write_tokens || 0));
      split.push(`uncached ${uncached}`);
      if (u.cache_read_tokens) split.push(`cache read ${u.cache_read_tokens}`);
      if (u.cache_write_tokens) split.push(`cache write ${u.cache_write_tokens}`);
    }
    parts.push(`in ${u.input_tokens}${split.length ? ` (${split.join(", ")})` : ""}`);
  }
  if (u.output_tokens !== undefined) parts.push(`out ${u.output_tokens}`);
  if (u.cost_usd !== undefined && u.cost_usd !== null) parts.push(`$${Number(u.cost_usd).toFixed(4)}`);
  return parts.join(" · ");
}

// ---- API ---------------------------------------------------------------------------------------------

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  $("auth-error").hidden = response.status !== 401;
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) {
    const error = new Error((data && data.error && data.error.message) || response.statusText);
    error.status = response.status;
    throw error;
  }
  return data;
}

// Reads a text/event-stream with fetch (cookie auth, every event type, no automatic reconnect):
// onEvent(data, eventName) for each message with data.
async function readStream(path, onEvent, signal) {
  const response = await fetch(path, { credentials: "same-origin", signal });
  $("auth-error").hidden = response.status !== 401;
  if (!response.ok || !response.body) throw new Error(`event stream: HTTP ${response.status}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = [];
      let name = "message";
      for (const line of block.split("\n")) {
        if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        else if (line.startsWith("event:")) name = line.slice(6).trim();
      }
      if (data.length) {
        try { onEvent(JSON.parse(data.join("\n")), name); } catch (err) { console.error(err); }
      }
    }
  }
}

function readEvents(runId, debug, onEvent, signal) {
  return readStream(`/api/runs/${encodeURIComponent(runId)}/events${debug ? "?debug=1" : ""}`, onEvent, signal);
}

// ---- sessions ----------------------------------------------------------------------------------------

async function loadSessions() {
  try {
    state.sessions = (await api("GET", "/api/sessions")).sessions;
  } catch { return; }
  const list = clear($("session-list"));
  for (const s of state.sessions) {
    list.append(el("li", {
      class: s.session_id === state.sessionId ? "active" : "",
      "data-session": s.session_id,
      onclick: () => selectSession(s.session_id),
    },
    el("span", { class: "title" }, s.parent_session_id ? el("span", { class: "fork-mark" }, "⑂ ") : null,
      s.title || "(no message)"),
    el("span", { class: "meta" }, `${s.mode} · ${s.status || "no runs"} · ${time(s.updated_at)}`)));
  }
}

async function selectSession(sessionId) {
  state.newSession = false;
  if (state.sessionId !== sessionId && state.live) stopLive();
  state.sessionId = sessionId;
  history.replaceState(null, "", sessionId ? `#${sessionId}` : "#");
  await loadSession();
  await loadSessions();
  if (state.view === "agents") await loadTeam();
}

async function loadSession() {
  if (!state.sessionId) {
    state.replay = null;
    render();
    return;
  }
  try {
    state.replay = await api("GET", `/api/sessions/${encodeURIComponent(state.sessionId)}`);
  } catch (err) {
    if (err.status === 404) { state.sessionId = null; state.replay = null; }
  }
  render();
  const live = (state.replay?.runs || []).find((r) => !r.parent_run_id && LIVE_STATUSES.has(r.status));
  if (live && (!state.live || state.live.done || state.live.runId !== live.run_id)) followRun(live.run_id, state.sessionId);
}

// ---- conversation ------------------------------------------------------------------------------------

function rootAgentId(replay) {
  const root = (replay.runs || []).find((r) => !r.parent_run_id);
  return root ? root.agent_id : null;
}

function activePath(replay) {
  const byId = new Map((replay.nodes || []).map((n) => [n.node_id, n]));
  const path = [];
  let node = byId.get(replay.active_node_id);
  while (node) { path.unshift(node); node = byId.get(node.parent_id); }
  return path;
}

function toolLine(name, detail, cls) {
  return el("div", { class: `tool ${cls || ""}` }, `⚙ ${name}${detail ? "  " + detail : ""}`);
}

// A tool call: its line, and below it (created on demand) the nested activity of the child runs it started.
function toolBox(name, detail, cls, callId) {
  const line = toolLine(name, detail, cls);
  const box = el("div", { class: "toolbox", "data-call": callId || "" }, line);
  box.line = line;
  return box;
}

function nestIn(box) {
  if (!box.nest) { box.nest = el("div", { class: "nested" }); box.append(box.nest); }
  return box.nest;
}

function kindLabel(type, purpose) {
  const kind = type || "child";
  return purpose && purpose !== kind ? `${kind} ${purpose}` : kind;
}

function childHead(label, runId) {
  return el("div", { class: "child-head", "data-run": runId }, `↳ ${label} · run ${runId}`);
}

function addressChips(node) {
  const workers = node.metadata?.addressed_workers;
  if (!Array.isArray(workers) || !workers.length) return null;
  return el("span", { class: "chips" }, workers.map((w) => el("span", { class: "chip" }, `→ @${w.worker_agent_id}`)));
}

// Child runs of the session by the agent-tool call that started them (from the child summary events the
// session replay holds): callId -> [{runId, summary}].
function childRunsByCall(replay) {
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
    const list = byCall.get(callId) || [];
    list.push(child);
    byCall.set(callId, list);
  }
  return byCall;
}

// A finished child run's own activity (its events, grandchildren nested), replayed from its event stream
// once and cached; shown automatically for children seen live, on request for the others.
function childActivity(runId, container) {
  const replayInto = (events) => {
    const pseudo = { runId, tools: {}, lanes: {}, quiet: true };
    pseudo.root = { bubble: null, textNode: null, child: true, append: (node) => container.append(node) };
    for (const ev of events) handleLiveEvent(pseudo, ev);
  };
  const cached = state.childEvents.get(runId);
  if (cached) { replayInto(cached); return; }
  const events = [];
  readEvents(runId, false, (ev) => events.push(ev))
    .then(() => { state.childEvents.set(runId, events); replayInto(events); })
    .catch((err) => container.append(el("p", { class: "error" }, `child events: ${err.message}`)));
}

function renderChild(child, nest) {
  const c = child.summary || {};
  const label = child.worker ? `worker @${child.worker}` : kindLabel(c.agent_type, c.purpose);
  nest.append(childHead(label, child.runId));
  const activity = el("div", { class: "child-activity", "data-run": child.runId });
  nest.append(activity);
  const terminal = c.status && !LIVE_STATUSES.has(c.status);
  if (terminal && state.expanded.has(child.runId)) childActivity(child.runId, activity);
  else if (terminal) {
    activity.append(el("button", { type: "button", class: "show-activity", onclick: () => {
      state.expanded.add(child.runId);
      activity.replaceChildren();
      childActivity(child.runId, activity);
    } }, "show activity"));
  }
  nest.append(el("div", { class: "child-head" }, `↳ ${c.status || "…"}${c.result_summary ? ": " + short(c.result_summary, 300) : ""}`));
}

// The root agent's active path; each agent-tool call carries its child runs nested below it.
function renderNodes(nodes, box, byCall) {
  for (const node of nodes) {
    if (node.role === "user" && node.node_type === "message") {
      box.append(el("div", { class: "msg user", "data-node": node.node_id }, el("span", { class: "who" }, "you"),
        textOf(node.content), mediaOf(node.content), addressChips(node)));
    } else if (node.role === "assistant") {
      const text = textOf(node.content);
      const reasoning = reasoningOf(node.content);
      if (reasoning) box.append(reasoningBox(reasoning));
      if (text) {
        box.append(el("div", { class: `msg assistant${node.metadata?.partial ? " partial" : ""}`, "data-node": node.node_id },
          el("span", { class: "who" }, "assistant"), text));
      }
      for (const block of node.content || []) {
        if (block.type !== "tool_call") continue;
        const tool = toolBox(block.name, short(JSON.stringify(block.arguments), 240), "", block.tool_call_id);
        box.append(tool);
        for (const child of byCall.get(block.tool_call_id) || []) renderChild(child, nestIn(tool));
      }
    } else if (node.role === "tool") {
      for (const block of node.content || []) {
        if (block.type !== "tool_result") continue;
        const summary = block.error ? `${block.error.code}: ${block.error.message}` : resultText(block.content);
        box.append(toolLine("result", short(summary, 300), block.is_error ? "failed" : "ok"));
        const media = mediaOf(block.content);
        if (media.length) box.append(el("div", { class: "tool-media" }, media));
      }
    } else if (node.node_type === "compaction" || node.role === "system") {
      box.append(el("div", { class: "notice" }, `[${node.node_type}]`));
    }
  }
}

function renderConversation() {
  const box = clear($("conversation"));
  if (!state.replay) {
    box.append(el("p", { class: "muted" }, state.newSession
      ? "New session: type the first message below."
      : "Select a session on the left, or start a new one."));
    return;
  }
  const root = rootAgentId(state.replay);
  const path = activePath(state.replay).filter((node) => !root || node.agent_id === root);
  renderNodes(path, box, childRunsByCall(state.replay));
  if (state.live && !state.live.done && state.live.sessionId === state.sessionId) {
    for (const item of state.live.items) box.append(item);
  }
  box.scrollTop = box.scrollHeight;
}

function liveAppend(node) {
  state.live.items.push(node);
  if (state.view === "conversation" && state.live.sessionId === state.sessionId) {
    $("conversation").append(node);
    $("conversation").scrollTop = $("conversation").scrollHeight;
  }
}

// Where a run's live activity goes: the conversation for the followed run, the nested box under the
// parent's agent-tool call for a child run (grandchildren nest under their parent's call in turn).
function laneFor(live, ev) {
  if (ev.run_id === live.runId || !ev.parent_run_id) return live.root;
  let lane = live.lanes[ev.run_id];
  if (!lane) {
    const host = live.tools[ev.parent_tool_call_id];
    const target = host ? nestIn(host) : null;
    lane = { bubble: null, textNode: null, child: true, append: (node) => (target ? target.append(node) : liveAppend(node)) };
    live.lanes[ev.run_id] = lane;
  }
  return lane;
}

function handleLiveEvent(live, ev) {
  const p = ev.payload || {};
  const child = ev.run_id !== live.runId;
  const lane = laneFor(live, ev);
  const bubble = (cls) => {
    lane.bubble = el("div", { class: `msg assistant ${cls}` }, el("span", { class: "who" }, lane.child ? "child agent" : "assistant"));
    lane.textNode = document.createTextNode("");
    lane.bubble.append(lane.textNode);
    lane.append(lane.bubble);
  };
  switch (ev.event_type) {
    case "reasoning_delta":
      if (!lane.reasoning) { lane.reasoning = reasoningBox(""); lane.append(lane.reasoning); }
      lane.reasoning.textNode.data += String(p.text || "");
      break;
    case "message_delta":
      lane.reasoning = null;
      if (!lane.bubble) bubble("streaming");
      lane.textNode.data += String(p.text || "");
      break;
    case "message_completed":
      lane.reasoning = null;
      if (p.role === "assistant" || p.role === undefined) {
        if (!lane.bubble && p.text) bubble("");
        if (lane.bubble) { lane.textNode.data = String(p.text || lane.textNode.data); lane.bubble.classList.remove("streaming"); }
        lane.answered = lane.bubble;
        lane.bubble = null;
      }
      break;
    case "model_progress":
      if (!child) showModelProgress(live, lane, p);
      return;
    case "tool_started":
      live.tools[ev.tool_call_id] = toolBox(p.tool_name, short(p.args_summary, 240), child ? "child" : "", ev.tool_call_id);
      lane.append(live.tools[ev.tool_call_id]);
      break;
    case "tool_completed":
    case "tool_failed":
    case "tool_denied": {
      const line = live.tools[ev.tool_call_id]?.line;
      const outcome = ev.event_type === "tool_completed" ? `done (${p.duration_ms ?? "?"} ms)`
        : ev.event_type === "tool_denied" ? `denied: ${p.reason || ""}` : `failed: ${p.error?.message || ""}`;
      const cls = ev.event_type === "tool_completed" ? "ok" : ev.event_type === "tool_denied" ? "denied" : "failed";
      if (line) { line.classList.add(cls); line.append(document.createTextNode(`  → ${outcome}`)); }
      else lane.append(toolLine(p.tool_name, outcome, cls));
      break;
    }
    case "child_agent_created":
    case "worker_dispatched": {
      if (p.child_run_id) state.expanded.add(p.child_run_id);
      const host = live.tools[ev.tool_call_id || p.tool_call_id];
      const label = ev.event_type === "worker_dispatched" ? `worker @${p.worker_agent_id} (${p.worker_pool_id})` : kindLabel(p.agent_type, p.purpose);
      const head = childHead(label, p.child_run_id);
      if (host) nestIn(host).append(head); else lane.append(head);
      if (ev.event_type === "worker_dispatched" && state.view === "pools") loadPools();
      break;
    }
    case "child_agent_completed":
    case "child_agent_failed":
    case "child_agent_cancelled": {
      const host = live.tools[ev.tool_call_id || p.tool_call_id];
      const line = el("div", { class: "child-head" }, `↳ ${p.status || ev.event_type.replace("child_agent_", "")} · run ${p.child_run_id}`);
      if (host) nestIn(host).append(line); else lane.append(line);
      if (state.view === "pools") loadPools();
      break;
    }
    case "run_queued":
      lane.append(el("div", { class: "notice" }, `[queued, position ${p.queue_position}]`));
      break;
    case "error":
      lane.append(el("div", { class: "tool failed" }, `error ${p.code}: ${p.message}`));
      break;
    default:
      break;
  }
  if (live.quiet) return;
  if (!child) $("run-status").textContent = `run ${live.runId}: ${ev.event_type}`;
  if (!child && (TERMINAL.has(ev.event_type) || ev.event_type === "loop_aborted")) {
    $("run-status").textContent = `run ${ev.event_type.replace("run_", "").replace("loop_", "")}`;
  }
  if (state.view === "conversation") $("conversation").scrollTop = $("conversation").scrollHeight;
}

// The followed run's model call, from the same model_progress events as the CLI's status line: while the
// model reads the prompt, the run status shows the model, the prompt size and the seconds waited; once the
// answer is complete its output rate goes under the reply.
function showModelProgress(live, lane, p) {
  clearInterval(live.waitTimer);
  live.waitTimer = null;
  const status = $("run-status");
  const model = String(p.model || "the model");
  if (p.phase === "waiting") {
    const started = Date.now();
    const tokens = typeof p.prompt_tokens === "number" ? `${p.prompt_tokens.toLocaleString("en-US")} prompt tokens` : "the prompt";
    const draw = () => {
      if (state.live === live) status.textContent = `waiting for ${model} · ${tokens} · ${Math.floor((Date.now() - started) / 1000)} s`;
    };
    draw();
    live.waitTimer = setInterval(draw, 1000);
  } else if (p.phase === "streaming") {
    status.textContent = `run ${live.runId}: ${model} is answering (first token after ${((p.waited_ms || 0) / 1000).toFixed(1)} s)`;
  } else if (p.phase === "done" && p.stop_reason !== "max_tokens") {
    const rate = typeof p.tokens_per_second === "number" ? ` at ${p.tokens_per_second.toFixed(1)} tokens/s` : "";
    const line = `${p.output_tokens ?? "?"} tokens${rate} · first token after ${((p.waited_ms || 0) / 1000).toFixed(1)} s`;
    if (lane.answered) lane.answered.append(el("div", { class: "rate muted" }, line));
    status.textContent = `run ${live.runId}: ${line}`;
  }
}

function stopLive() {
  if (state.live) clearInterval(state.live.waitTimer);
  if (state.live) state.live.abort.abort();
  state.live = null;
  $("cancel-run").hidden = true;
}

async function followRun(runId, sessionId) {
  stopLive();
  const live = { runId, sessionId, abort: new AbortController(), tools: {}, lanes: {}, items: [] };
  live.root = { bubble: null, textNode: null, child: false, append: liveAppend };
  state.live = live;
  $("cancel-run").hidden = false;
  renderConversation();
  renderApprovals();
  try {
    await readEvents(runId, false, (ev) => { if (state.live === live) handleLiveEvent(live, ev); }, live.abort.signal);
  } catch (err) {
    if (live.abort.signal.aborted) return;
    $("run-status").textContent = String(err.message || err);
  }
  if (state.live !== live) return;
  live.done = true;  // the stored session replaces the live items; state.live clears once it is shown
  $("cancel-run").hidden = true;
  if (state.sessionId === sessionId) await loadSession();
  await loadSessions();
  if (state.view === "pools") await loadPools();
  if (state.live === live) state.live = null;
}

async function send(event) {
  event.preventDefault();
  const box = $("message");
  const message = box.value;
  if (!message.trim()) return;
  const body = { message };
  if (state.sessionId && !state.newSession) body.session_id = state.sessionId;
  else body.mode = $("new-mode").value;
  if ($("permission-mode").value) body.permission_mode = $("permission-mode").value;
  $("send").disabled = true;
  try {
    if (body.session_id) {  // the path as stored now (an earlier run's stream may have been cut short)
      state.replay = await api("GET", `/api/sessions/${encodeURIComponent(state.sessionId)}`);
    }
    const created = await api("POST", "/api/runs", body);
    box.value = "";
    state.newSession = false;
    if (state.sessionId !== created.session_id) {  // a new session: nothing to replay yet
      state.sessionId = created.session_id;
      history.replaceState(null, "", `#${created.session_id}`);
      state.replay = { session_id: created.session_id, runs: [], nodes: [], events: [], children: [], tasks: [], active_node_id: null };
      render();
      loadSessions();
    }
    const pending = el("div", { class: "msg user" }, el("span", { class: "who" }, "you"), message);
    followRun(created.run_id, created.session_id);
    liveAppend(pending);
  } catch (err) {
    $("run-status").textContent = `not sent: ${err.message}`;
  } finally {
    $("send").disabled = false;
  }
}

// ---- approvals ---------------------------------------------------------------------------------------

function diffView(diff) {
  const pre = el("pre", { class: "diff" });
  for (const line of String(diff).split("\n")) {
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    pre.append(el("span", { class: cls }, line || " "));
  }
  return pre;
}

// Whitespace and invisible characters an argument could hide code behind (a run of spaces that pushes the
// rest out of view, a newline, a tab, a bidi override, a zero-width space) become visible marker spans.
const HIDDEN_TEXT = /( {2,}|^ | $|[\t\n\r\v\f\u0085\u00a0\u1680\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]|[\u0000-\u0008\u000e-\u001f\u007f])/g;

function visibleMarker(chunk) {
  if (chunk[0] === " ") return chunk.length === 1 ? "␠" : `␠×${chunk.length}`;
  const names = { "\t": "⇥tab", "\n": "↵newline", "\r": "␍CR" };
  return names[chunk] || `U+${chunk.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}

function visibleText(text) {
  const parts = [];
  let last = 0;
  for (const match of String(text).matchAll(HIDDEN_TEXT)) {
    if (match.index > last) parts.push(String(text).slice(last, match.index));
    parts.push(el("span", { class: "ws", title: "whitespace or invisible character" }, visibleMarker(match[0])));
    last = match.index + match[0].length;
  }
  if (last < String(text).length) parts.push(String(text).slice(last));
  return parts;
}

// A command's whole argv, one argument per item, wrapped, whitespace made visible (as the CLI shows it).
function argvView(argv, cls) {
  return el("ol", { class: `argv ${cls || ""}` }, argv.map((arg) => el("li", {}, visibleText(arg))));
}

// What "allow for session" will remember for this request.
function sessionGrantView(a, meta) {
  if (Array.isArray(meta.protected) && meta.protected.length) return el("p", { class: "muted grant" }, "Allow for session acts as allow once here (protected path: never remembered).");
  if (meta.allow_for_session_available === false) return el("p", { class: "muted grant" }, "Allow for session acts as allow once here (nothing to remember).");
  if (Array.isArray(meta.session_argv_prefix)) {
    const what = meta.session_argv_exact ? "exactly this command, nothing added:" : "commands starting with:";
    return el("div", { class: "grant", "data-exact": meta.session_argv_exact ? "true" : "false" },
      el("p", {}, `Allow for session remembers ${what}`),
      argvView(meta.session_argv_prefix, "prefix"),
      meta.session_argv_exact ? null : el("p", { class: "muted" }, `(${meta.session_grant_covers || "an added option that runs code, writes or sends data asks again"})`));
  }
  return el("p", { class: "grant" }, `Allow for session remembers ${a.tool_name} on ${a.target_scope || "this target"}.`);
}

function argumentsRow(a, meta) {
  if (Array.isArray(meta.argv)) return ["argv", argvView(meta.argv)];
  const cut = typeof meta.args_length === "number" && meta.args_length > String(a.args_summary).length
    ? el("span", { class: "muted" }, ` [arguments cut: ${String(a.args_summary).length} of ${meta.args_length} characters shown]`) : null;
  return ["arguments", [visibleText(a.args_summary), cut]];
}

function approvalCard(a) {
  const answer = async (decision, card) => {
    for (const b of card.querySelectorAll("button")) b.disabled = true;
    try {
      await api("POST", `/api/approvals/${encodeURIComponent(a.request_id)}`, { decision });
      card.replaceChildren(el("p", { class: "muted" }, `${decision.replace(/_/g, " ")}: ${a.tool_name}`));
    } catch (err) {
      card.replaceChildren(el("p", { class: "error" }, err.status === 409 ? `already ${err.message.split(" ").pop()}` : err.message));
    }
    // the pushed approval_answered / approval_expired removes the card on every client
  };
  const card = el("div", { class: "approval", "data-request": a.request_id });
  const meta = a.metadata || {};
  const rows = [
    ["agent", `${a.agent_role} ${a.agent_id}`],
    ["tool", a.tool_name],
    ["permission", `${a.permission}${a.dangerous ? " (dangerous)" : ""}`],
    argumentsRow(a, meta),
    ["target", a.target_scope || "—"],
    ["cwd", a.cwd],
  ];
  if (a.network_host) rows.push(["network", a.network_host]);
  card.append(el("h4", {}, `Permission requested: ${a.tool_name}`),
    el("dl", {}, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])));
  if (meta.diff) {
    card.append(diffView(meta.diff));
    if (meta.diff_omitted_lines) card.append(el("p", { class: "muted" }, `(${meta.diff_omitted_lines} more lines not shown)`));
  }
  card.append(sessionGrantView(a, meta));
  const forSession = meta.allow_for_session_available === false ? "Allow (once; no session grant here)" : "Allow for session";
  card.append(el("div", { class: "actions" },
    el("button", { type: "button", class: "primary", "data-decision": "allow_once", onclick: () => answer("allow_once", card) }, "Allow once"),
    el("button", { type: "button", "data-decision": "allow_for_session", onclick: () => answer("allow_for_session", card) }, forSession),
    el("button", { type: "button", class: "deny", "data-decision": "deny", onclick: () => answer("deny", card) }, "Deny")));
  return card;
}

// Shows the pending requests of the open session as cards (kept while still pending, so an answer in
// progress is not redrawn) and counts the other sessions' requests in the header badge.
function renderApprovals() {
  const pending = [...state.approvals.values()];
  const mine = pending.filter((a) => a.session_id === state.sessionId);
  const others = pending.filter((a) => a.session_id !== state.sessionId);
  const badge = $("other-approvals");
  badge.hidden = others.length === 0;
  badge.textContent = `${others.length} approval${others.length === 1 ? "" : "s"} waiting in other sessions`;
  badge.onclick = () => others.length && selectSession(others[0].session_id);
  const box = $("approvals");
  const shown = new Map([...box.querySelectorAll(".approval")].map((c) => [c.dataset.request, c]));
  for (const [id, card] of shown) if (!mine.some((a) => a.request_id === id)) card.remove();
  for (const a of mine) if (!shown.has(a.request_id)) box.append(approvalCard(a));
}

// Approvals and questions are pushed (GET /api/approvals/events, /api/questions/events): a snapshot, then
// every change as it commits. A stream is reopened after a drop (a fresh snapshot resynchronises).
async function watchPending(kind, key, onChange) {
  let delay = 500;
  for (;;) {
    try {
      await readStream(`/api/${kind}s/events`, (data, name) => {
        delay = 500;
        if (name === `${kind}s`) state[key] = new Map(data[`${kind}s`].map((a) => [a.request_id, a]));
        else if (name === `${kind}_pending`) state[key].set(data.request_id, data);
        else if (name === `${kind}_answered` || name === `${kind}_expired`) state[key].delete(data.request_id);
        else return;
        onChange();
      });
    } catch (err) { /* reconnect below */ }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 8000);
  }
}

const watchApprovals = () => watchPending("approval", "approvals", renderApprovals);

// ---- questions (internal.ask_user) -------------------------------------------------------------------

function questionCard(q) {
  const card = el("div", { class: "question", "data-request": q.request_id });
  const answer = async (text) => {
    if (!String(text).trim()) return;
    for (const b of card.querySelectorAll("button, input")) b.disabled = true;
    try {
      await api("POST", `/api/questions/${encodeURIComponent(q.request_id)}`, { answer: text });
      card.replaceChildren(el("p", { class: "muted" }, `answered: ${text}`));
    } catch (err) {
      card.replaceChildren(el("p", { class: "error" }, err.status === 409 ? `already ${err.message.split(" ").pop()}` : err.message));
    }
    // the pushed question_answered / question_expired removes the card on every client
  };
  const own = el("input", { type: "text", placeholder: "or answer in your own words", "aria-label": "your answer" });
  own.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); answer(own.value); } });
  card.append(
    el("h4", {}, q.agent_role === "main" || q.agent_role === "orchestrator" ? "The agent asks" : `The ${q.agent_role} agent asks`),
    el("p", { class: "text" }, q.question),
    el("div", { class: "actions" },
      (q.options || []).map((option) => el("button", { type: "button", class: "option", onclick: () => answer(option) }, option)),
      own,
      el("button", { type: "button", class: "primary", onclick: () => answer(own.value) }, "Answer")));
  return card;
}

function renderQuestions() {
  const mine = [...state.questions.values()].filter((q) => q.session_id === state.sessionId);
  const box = $("questions");
  const shown = new Map([...box.querySelectorAll(".question")].map((c) => [c.dataset.request, c]));
  for (const [id, card] of shown) if (!mine.some((q) => q.request_id === id)) card.remove();
  for (const q of mine) if (!shown.has(q.request_id)) box.append(questionCard(q));
}

const watchQuestions = () => watchPending("question", "questions", renderQuestions);

// ---- plan mode ---------------------------------------------------------------------------------------

// The latest root run of the open session ended in plan mode with its plan: offer to carry it out.
function renderPlanApproval() {
  const runs = (state.replay?.runs || []).filter((r) => !r.parent_run_id);
  const last = runs[runs.length - 1];
  const show = Boolean(last && last.permission_mode === "plan" && last.status === "completed" && !(state.live && !state.live.done));
  const button = $("approve-plan");
  button.hidden = !show;
  button.onclick = () => {
    $("permission-mode").value = "default";
    $("message").value = "Carry out the plan.";
    $("composer").requestSubmit();
  };
}

// ---- worker pools ------------------------------------------------------------------------------------

function sessionMode() {
  if (state.newSession || !state.sessionId) return $("new-mode").value;
  return state.sessions.find((s) => s.session_id === state.sessionId)?.mode || "normal";
}

function addressWorker(worker) {
  const box = $("message");
  const mention = `@${worker.worker_agent_id} `;
  if (!box.value.includes(mention)) box.value = mention + box.value;
  state.view = "conversation";
  render();
  box.focus();
}

const poolsSession = () => (state.sessionId && !state.newSession ? state.sessionId : null);

async function loadPools() {
  let data;
  const query = poolsSession() ? `?session_id=${encodeURIComponent(poolsSession())}` : "";
  try { data = await api("GET", `/api/pools${query}`); } catch (err) { $("pools").replaceChildren(el("p", { class: "error" }, err.message)); return; }
  state.pools = data;
  if (state.view === "pools") renderPools();
}

function renderPools() {
  const box = clear($("pools"));
  const data = state.pools;
  if (!data || data.session_id !== poolsSession()) { box.append(el("p", { class: "muted" }, "Loading…")); return; }
  const orchestrator = sessionMode() === "orchestrator";
  box.append(el("p", { class: "muted" }, data.session_id
    ? "Workers' state in this session. "
    : "Workers' state in any session. ",
  orchestrator ? "In this orchestrator session a message may address a worker with @<worker>: the Orchestrator is asked to dispatch it."
    : "Addressing a worker with @<worker> works in orchestrator-mode sessions."));
  if (!data.pools.length) box.append(el("p", { class: "muted" }, "No worker pools are configured ([[agents.worker_pools]] in config.toml)."));
  const queuedFor = (w) => data.queued_runs.filter((q) => q.addressed_workers.some((a) => a.worker_pool_id === w.worker_pool_id && a.worker_agent_id === w.worker_agent_id));
  for (const pool of data.pools) {
    const card = el("div", { class: `pool${pool.valid ? "" : " invalid"}`, "data-pool": pool.pool_id },
      el("h4", {}, `pool ${pool.pool_id}`, pool.default ? el("span", { class: "chip" }, "default") : null,
        pool.valid ? null : el("span", { class: "chip bad" }, "invalid")));
    for (const problem of pool.problems) card.append(el("p", { class: "error" }, problem));
    if (pool.workers.length) {
      const body = el("tbody");
      for (const w of pool.workers) {
        const queued = queuedFor(w);
        body.append(el("tr", { "data-worker": w.worker_agent_id },
          el("td", {}, el("strong", {}, `@${w.worker_agent_id}`), el("div", { class: "muted" }, w.name)),
          el("td", {}, el("span", { class: `status ${w.status}` }, w.status)),
          el("td", {}, w.current_run_id ? `run ${w.current_run_id}${w.current_step_id ? ` · step ${w.current_step_id}` : ""}` : "—"),
          el("td", { class: "queued" }, queued.length ? `${queued.length} queued: ${queued.map((q) => q.run_id).join(", ")}` : "none"),
          el("td", { class: "muted" }, short(w.description, 120)),
          el("td", {}, el("button", { type: "button", class: "address", disabled: !orchestrator, onclick: () => addressWorker(w) }, `@${w.worker_agent_id}`))));
      }
      card.append(el("table", {}, el("thead", {}, el("tr", {}, ["worker", "state", "current run", "queued runs", "description", "address"].map((h) => el("th", {}, h)))), body));
    }
    box.append(card);
  }
  if (data.queued_runs.length) {
    box.append(el("h4", {}, "Queued runs"), el("ul", {}, data.queued_runs.map((q) => el("li", {},
      `${q.run_id} (session ${q.session_id})`, q.addressed_workers.map((a) => el("span", { class: "chip" }, `→ @${a.worker_agent_id}`))))));
  }
}

// ---- node tree ---------------------------------------------------------------------------------------

function renderTree() {
  const box = clear($("tree"));
  const replay = state.replay;
  if (!replay) return;
  const root = rootAgentId(replay);
  const nodes = (replay.nodes || []).filter((n) => !root || n.agent_id === root);
  const onPath = new Set(activePath(replay).map((n) => n.node_id));
  const kids = new Map();
  for (const n of nodes) {
    const list = kids.get(n.parent_id || "") || [];
    list.push(n);
    kids.set(n.parent_id || "", list);
  }
  const known = new Set(nodes.map((n) => n.node_id));
  const branch = (parentId) => {
    const list = kids.get(parentId) || [];
    if (!list.length) return null;
    return el("ul", {}, list.map((n) => el("li", {},
      el("span", {
        class: `node${onPath.has(n.node_id) ? " on-path" : ""}${n.node_id === replay.active_node_id ? " active-leaf" : ""}`,
        "data-node": n.node_id,
      },
      el("span", { class: "role" }, n.role),
      el("span", { class: "text" }, short(textOf(n.content) || (n.content || []).map((b) => b.name || b.type).join(", "), 90)),
      n.node_id === replay.active_node_id ? el("span", { class: "muted" }, "active") : el("button", {
        type: "button", class: "switch", onclick: () => switchTo(n.node_id),
      }, "Switch here"),
      n.node_id === replay.active_node_id || n.metadata?.partial || n.metadata?.failed ? null : el("button", {
        type: "button", class: "rewind", onclick: () => rewindTo(n.node_id),
      }, "Rewind to here"),
      n.role === "user" && n.node_type === "message"
        ? el("button", { type: "button", class: "fork", onclick: () => forkAt(n.node_id) }, "Fork") : null),
      branch(n.node_id))));
  };
  const roots = nodes.filter((n) => !n.parent_id || !known.has(n.parent_id));
  kids.set("", roots);
  box.append(branch("") || el("p", { class: "muted" }, "No nodes yet."));
}

async function switchTo(nodeId) {
  try {
    await api("POST", `/api/sessions/${encodeURIComponent(state.sessionId)}/active`, { node_id: nodeId });
  } catch (err) { alert(err.message); return; }
  await loadSession();
}

// Files and conversation back to a node (POST /api/sessions/{id}/rewind), after a confirmation; a refusal
// (a file changed since) lists the files and changes nothing.
async function rewindTo(nodeId) {
  if (!confirm("Rewind to here? The files the agent changed after this node are put back, and the conversation continues from it.")) return;
  try {
    const result = await api("POST", `/api/sessions/${encodeURIComponent(state.sessionId)}/rewind`, { node_id: nodeId });
    const left = result.skipped.length ? `, ${result.skipped.length} left alone (${result.skipped.map((s) => `${s.path}: ${s.reason}`).join("; ")})` : "";
    $("rewind-status").textContent = `rewound: ${result.restored.length} file(s) restored, ${result.removed.length} removed${left}`;
  } catch (err) {
    $("rewind-status").textContent = `rewind refused: ${err.message}`;
    alert(`Rewind refused, nothing was changed:\n${err.message}`);
    return;
  }
  await loadSession();
}

async function forkAt(nodeId) {
  try {
    const forked = await api("POST", `/api/sessions/${encodeURIComponent(state.sessionId)}/fork`, { node_id: nodeId });
    await selectSession(forked.session_id);
  } catch (err) { alert(err.message); }
}

// ---- agents and tasks --------------------------------------------------------------------------------

function renderAgents() {
  const body = clear($("runs-table").querySelector("tbody"));
  const replay = state.replay;
  clear($("children"));
  clear($("tasks"));
  if (!replay) return;
  for (const r of replay.runs || []) {
    body.append(el("tr", {},
      el("td", {}, r.run_id), el("td", {}, `${r.agent_type || ""} ${r.purpose || ""}`.trim()),
      el("td", {}, r.parent_run_id || "—"), el("td", {}, r.status), el("td", {}, r.end_reason || ""),
      el("td", {}, usageText(r.usage))));
  }
  for (const c of replay.children || []) {
    $("children").append(el("div", { class: "child-card" },
      el("strong", {}, kindLabel(c.agent_type, c.purpose)), " ",
      el("span", { class: "muted" }, `run ${c.child_run_id} · ${c.status}`),
      c.result_summary ? el("div", {}, short(c.result_summary, 400)) : null));
  }
  renderTasks(replay.tasks || []);
  renderTeam();
}

// ---- teammates ---------------------------------------------------------------------------------------

async function loadTeam() {
  const sid = state.sessionId && !state.newSession ? state.sessionId : null;
  if (!sid) { state.team = null; return; }
  let data;
  try { data = await api("GET", `/api/sessions/${encodeURIComponent(sid)}/team`); } catch (err) { state.team = { session_id: sid, error: err.message }; renderTeam(); return; }
  state.team = data;
  if (state.view === "agents") renderTeam();
}

function renderTeam() {
  const box = clear($("team"));
  const data = state.team;
  if (!data || data.session_id !== state.sessionId) { box.append(el("p", { class: "muted" }, "No teammates in this session.")); return; }
  if (data.error) { box.append(el("p", { class: "error" }, data.error)); return; }
  if (!data.teammates.length) { box.append(el("p", { class: "muted" }, "No teammates in this session.")); return; }
  const body = el("tbody");
  for (const m of data.teammates) {
    const kind = `${m.resident ? "resident" : "one task"}, ${m.isolation}${m.autonomous ? ", autonomous" : ""}`;
    body.append(el("tr", { class: "teammate", "data-name": m.name },
      el("td", {}, m.name), el("td", { class: `state-${m.state}` }, m.state),
      el("td", {}, `${m.inbox_depth} unread`), el("td", {}, kind),
      el("td", {}, el("a", { href: `#${encodeURIComponent(m.session_id)}`, onclick: (e) => { e.preventDefault(); selectSession(m.session_id); } }, m.session_id))));
  }
  box.append(el("table", { id: "team-table" },
    el("thead", {}, el("tr", {}, ["name", "state", "inbox", "kind", "session"].map((h) => el("th", {}, h)))), body));
}

function renderTasks(tasks) {
  const box = $("tasks");
  if (!tasks.length) { box.append(el("p", { class: "muted" }, "No Tasks in this session.")); return; }
  for (const view of tasks) {
    const task = view.task || {};
    const steps = task.steps || [];
    const card = el("div", { class: "task", "data-task": view.task_id || "" },
      el("strong", {}, task.title || task.goal || view.task_id || "Task"), " ",
      el("span", { class: "muted" }, view.status || task.status || ""));
    if (view.error) card.append(el("p", { class: "error" }, view.error.message));
    card.append(stepDag(steps));
    box.append(card);
  }
}

function stepDag(steps) {
  const byId = new Map(steps.map((s) => [s.step_id, s]));
  const depth = new Map();
  const level = (s, seen = new Set()) => {
    if (depth.has(s.step_id)) return depth.get(s.step_id);
    if (seen.has(s.step_id)) return 0;
    seen.add(s.step_id);
    const deps = (s.depends_on_step_ids || []).map((d) => byId.get(d)).filter(Boolean);
    const value = deps.length ? 1 + Math.max(...deps.map((d) => level(d, seen))) : 0;
    depth.set(s.step_id, value);
    return value;
  };
  const columns = [];
  for (const s of steps) { const l = level(s); (columns[l] = columns[l] || []).push(s); }
  const W = 190, H = 46, GX = 60, GY = 16;
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((s, y) => pos.set(s.step_id, { x: 10 + x * (W + GX), y: 10 + y * (H + GY) })));
  const width = 20 + columns.length * (W + GX);
  const height = 20 + Math.max(1, ...columns.map((c) => c.length)) * (H + GY);
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#9a9aa5" }))));
  for (const s of steps) {
    const to = pos.get(s.step_id);
    for (const d of s.depends_on_step_ids || []) {
      const from = pos.get(d);
      if (from) root.append(svg("path", { class: "edge", d: `M${from.x + W},${from.y + H / 2} C${from.x + W + GX / 2},${from.y + H / 2} ${to.x - GX / 2},${to.y + H / 2} ${to.x},${to.y + H / 2}` }));
    }
  }
  for (const s of steps) {
    const p = pos.get(s.step_id);
    root.append(svg("g", { class: `step ${s.status}`, "data-step": s.step_id, transform: `translate(${p.x},${p.y})` },
      svg("rect", { width: W, height: H, rx: 6 }),
      svg("text", { x: 8, y: 18 }, short(s.title || s.step_id, 26)),
      svg("text", { x: 8, y: 36, fill: "#6b6b76" }, `${s.step_id} · ${s.status}`)));
  }
  return root;
}

// ---- timeline ----------------------------------------------------------------------------------------

// A request that stopped repeating the agent's previous one: where, and how much of it was still reused.
function cacheBreakText(payload) {
  const p = payload || {};
  const cause = p.cause ? ` (context ${p.cause})` : "";
  return `prompt cache break in ${p.part} at ${p.first_changed}, turn ${p.turn}: ` +
    `${p.reused_messages} of ${p.previous_messages} earlier messages reused${cause}`;
}

function renderTimeline() {
  const replay = state.replay;
  const body = clear($("timeline").querySelector("tbody"));
  const runSelect = $("filter-run");
  const chosen = runSelect.value;
  clear(runSelect).append(el("option", { value: "" }, "all runs"));
  for (const r of replay?.runs || []) runSelect.append(el("option", { value: r.run_id }, short(r.run_id, 40)));
  runSelect.value = chosen;
  if (!replay) return;
  const type = $("filter-type").value.trim();
  const lvl = $("filter-level").value;
  let shown = 0;
  for (const ev of replay.events || []) {
    const debug = DEBUG_ONLY.has(ev.event_type) || ev.event_type.startsWith("task_") || ev.level === "debug";
    if (debug && !state.debug) continue;
    if (type && !ev.event_type.includes(type)) continue;
    if (chosen && ev.run_id !== chosen) continue;
    if (lvl && ev.level !== lvl) continue;
    shown++;
    const cacheBreak = ev.event_type === "prompt_cache_break";
    body.append(el("tr", { class: `${debug ? "debug " : ""}${cacheBreak ? "cache-break " : ""}level-${ev.level}`,
      "data-type": ev.event_type },
      el("td", {}, ev.seq ?? ""), el("td", {}, ev.run_seq ?? ""), el("td", {}, time(ev.created_at)),
      el("td", {}, ev.event_type), el("td", {}, ev.level), el("td", {}, short(ev.run_id || "", 24)),
      el("td", { class: "payload" }, cacheBreak ? cacheBreakText(ev.payload) : short(JSON.stringify(ev.payload), 400))));
  }
  $("timeline-count").textContent = `${shown} of ${(replay.events || []).length} events`;
}

// ---- shell -------------------------------------------------------------------------------------------

function render() {
  for (const view of ["conversation", "tree", "agents", "pools", "timeline"]) $(`view-${view}`).hidden = view !== state.view;
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === state.view);
  const usage = state.replay?.usage;
  $("usage").textContent = usage && usage.runs ? `session usage: ${usageText(usage)}` : "";
  if (state.view === "conversation") renderConversation();
  if (state.view === "tree") renderTree();
  if (state.view === "agents") renderAgents();
  if (state.view === "timeline") renderTimeline();
  if (state.view === "pools") renderPools();
  renderApprovals();
  renderQuestions();
  renderPlanApproval();
  $("message").placeholder = sessionMode() === "orchestrator"
    ? "Message the Orchestrator; @<worker> addresses a worker (Enter to send, Shift+Enter for a new line)"
    : "Message the agent (Enter to send, Shift+Enter for a new line)";
}

async function init() {
  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      state.view = tab.dataset.view; render();
      if (state.view === "pools") loadPools();
      if (state.view === "agents") loadTeam();
    });
  }
  $("composer").addEventListener("submit", send);
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  $("cancel-run").addEventListener("click", async () => {
    if (!state.live) return;
    try { await api("POST", `/api/runs/${encodeURIComponent(state.live.runId)}/cancel`); } catch (err) { $("run-status").textContent = err.message; }
  });
  $("new-session").addEventListener("click", () => {
    stopLive();
    state.sessionId = null; state.replay = null; state.newSession = true;
    history.replaceState(null, "", "#");
    render(); loadSessions();
    $("message").focus();
  });
  $("new-mode").addEventListener("change", () => render());
  $("debug-toggle").addEventListener("change", (e) => { state.debug = e.target.checked; render(); });
  for (const id of ["filter-type", "filter-run", "filter-level"]) $(id).addEventListener("input", () => renderTimeline());
  try {
    const health = await api("GET", "/api/health");
    $("version").textContent = `v${health.version}`;
  } catch { /* the auth banner says why */ }
  const fromHash = decodeURIComponent(location.hash.slice(1));
  await loadSessions();
  if (fromHash) await selectSession(fromHash);
  else render();
  watchApprovals();
  watchQuestions();
  setInterval(() => { if (!state.live) loadSessions(); }, 4000);
  setInterval(() => { if (state.view === "pools") loadPools(); }, 2000);
  setInterval(() => { if (state.view === "agents") loadTeam(); }, 2000);
}

document.addEventListener("DOMContentLoaded", init);
