// soong-agent serve web UI: plain JavaScript, no build step, no external assets.
// Safety rule: every string that comes from the model, a tool, a file or storage is inserted as text
// (text nodes / textContent). This file never assigns innerHTML, outerHTML or insertAdjacentHTML.
"use strict";

const DEBUG_ONLY = new Set((
  "context_built model_started model_text_delta tool_call_delta model_completed provider_debug " +
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
  approvals: [],
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

function resultText(blocks) {
  return (blocks || []).map((b) => b.type === "text" ? b.text
    : b.type === "json" ? (b.summary || JSON.stringify(b.data))
    : b.type === "artifact_ref" ? `[artifact ${b.artifact_id}] ${b.summary || ""}` : "").join(" ");
}

function usageText(u) {
  if (!u) return "";
  const parts = [];
  if (u.input_tokens !== undefined) parts.push(`in ${u.input_tokens}`);
  if (u.output_tokens !== undefined) parts.push(`out ${u.output_tokens}`);
  if (u.cache_read_tokens) parts.push(`cache read ${u.cache_read_tokens}`);
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

// Reads a text/event-stream with fetch (cookie auth, every event type, no automatic reconnect).
async function readEvents(runId, debug, onEvent, signal) {
  const query = debug ? "?debug=1" : "";
  const response = await fetch(`/api/runs/${encodeURIComponent(runId)}/events${query}`,
    { credentials: "same-origin", signal });
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
      for (const line of block.split("\n")) {
        if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) {
        try { onEvent(JSON.parse(data.join("\n"))); } catch (err) { console.error(err); }
      }
    }
  }
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

function renderConversation() {
  const box = clear($("conversation"));
  if (!state.replay) {
    box.append(el("p", { class: "muted" }, state.newSession
      ? "New session: type the first message below."
      : "Select a session on the left, or start a new one."));
    return;
  }
  const root = rootAgentId(state.replay);
  for (const node of activePath(state.replay)) {
    if (root && node.agent_id !== root) continue;
    if (node.role === "user" && node.node_type === "message") {
      box.append(el("div", { class: "msg user", "data-node": node.node_id }, el("span", { class: "who" }, "you"),
        textOf(node.content)));
    } else if (node.role === "assistant") {
      const text = textOf(node.content);
      if (text) {
        box.append(el("div", { class: `msg assistant${node.metadata?.partial ? " partial" : ""}`, "data-node": node.node_id },
          el("span", { class: "who" }, "assistant"), text));
      }
      for (const block of node.content || []) {
        if (block.type === "tool_call") box.append(toolLine(block.name, short(JSON.stringify(block.arguments), 240)));
      }
    } else if (node.role === "tool") {
      for (const block of node.content || []) {
        if (block.type !== "tool_result") continue;
        const summary = block.error ? `${block.error.code}: ${block.error.message}` : resultText(block.content);
        box.append(toolLine("result", short(summary, 300), block.is_error ? "failed" : "ok"));
      }
    } else if (node.node_type === "compaction" || node.role === "system") {
      box.append(el("div", { class: "notice" }, `[${node.node_type}]`));
    }
  }
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

function handleLiveEvent(live, ev) {
  const p = ev.payload || {};
  const child = ev.run_id !== live.runId;
  switch (ev.event_type) {
    case "message_delta":
      if (!live.bubble) {
        live.bubble = el("div", { class: "msg assistant streaming" }, el("span", { class: "who" }, "assistant"));
        live.textNode = document.createTextNode("");
        live.bubble.append(live.textNode);
        liveAppend(live.bubble);
      }
      live.textNode.data += String(p.text || "");
      break;
    case "message_completed":
      if (p.role === "assistant" || p.role === undefined) {
        if (!live.bubble && p.text) {
          live.bubble = el("div", { class: "msg assistant" }, el("span", { class: "who" }, "assistant"));
          live.textNode = document.createTextNode("");
          live.bubble.append(live.textNode);
          liveAppend(live.bubble);
        }
        if (live.bubble) { live.textNode.data = String(p.text || live.textNode.data); live.bubble.classList.remove("streaming"); }
        live.bubble = null;
      }
      break;
    case "tool_started":
      live.tools[ev.tool_call_id] = toolLine(p.tool_name, short(p.args_summary, 240), child ? "child" : "");
      liveAppend(live.tools[ev.tool_call_id]);
      break;
    case "tool_completed":
    case "tool_failed":
    case "tool_denied": {
      const line = live.tools[ev.tool_call_id];
      const outcome = ev.event_type === "tool_completed" ? `done (${p.duration_ms ?? "?"} ms)`
        : ev.event_type === "tool_denied" ? `denied: ${p.reason || ""}` : `failed: ${p.error?.message || ""}`;
      const cls = ev.event_type === "tool_completed" ? "ok" : ev.event_type === "tool_denied" ? "denied" : "failed";
      if (line) { line.classList.add(cls); line.append(document.createTextNode(`  → ${outcome}`)); }
      else liveAppend(toolLine(p.tool_name, outcome, cls));
      break;
    }
    case "child_agent_created":
    case "worker_dispatched":
      liveAppend(el("div", { class: "tool child" }, `↳ ${p.agent_definition_id || p.worker_agent_id || "child"} agent (run ${p.child_run_id})`));
      break;
    case "child_agent_completed":
    case "child_agent_failed":
      liveAppend(el("div", { class: "tool child" }, `↳ child run ${p.child_run_id} ${p.status || ev.event_type.replace("child_agent_", "")}`));
      break;
    case "run_queued":
      liveAppend(el("div", { class: "notice" }, `[queued, position ${p.queue_position}]`));
      break;
    case "error":
      liveAppend(el("div", { class: "tool failed" }, `error ${p.code}: ${p.message}`));
      break;
    default:
      break;
  }
  if (!child) $("run-status").textContent = `run ${live.runId}: ${ev.event_type}`;
  if (!child && (TERMINAL.has(ev.event_type) || ev.event_type === "loop_aborted")) {
    $("run-status").textContent = `run ${ev.event_type.replace("run_", "").replace("loop_", "")}`;
  }
}

function stopLive() {
  if (state.live) state.live.abort.abort();
  state.live = null;
  $("cancel-run").hidden = true;
}

async function followRun(runId, sessionId) {
  stopLive();
  const live = { runId, sessionId, abort: new AbortController(), bubble: null, textNode: null, tools: {}, items: [] };
  state.live = live;
  $("cancel-run").hidden = false;
  renderConversation();
  pollApprovals();
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
  await pollApprovals();
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

function approvalCard(a) {
  const answer = async (decision, card) => {
    for (const b of card.querySelectorAll("button")) b.disabled = true;
    try {
      await api("POST", `/api/approvals/${encodeURIComponent(a.request_id)}`, { decision });
      card.replaceChildren(el("p", { class: "muted" }, `${decision.replace(/_/g, " ")}: ${a.tool_name}`));
    } catch (err) {
      card.replaceChildren(el("p", { class: "error" }, err.status === 409 ? `already ${err.message.split(" ").pop()}` : err.message));
    }
    setTimeout(pollApprovals, 300);
  };
  const card = el("div", { class: "approval", "data-request": a.request_id });
  const meta = a.metadata || {};
  const rows = [
    ["agent", `${a.agent_role} ${a.agent_id}`],
    ["tool", a.tool_name],
    ["permission", `${a.permission}${a.dangerous ? " (dangerous)" : ""}`],
    ["arguments", a.args_summary],
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
  const forSession = meta.allow_for_session_available === false ? "Allow (once; no session grant here)" : "Allow for session";
  card.append(el("div", { class: "actions" },
    el("button", { type: "button", class: "primary", "data-decision": "allow_once", onclick: () => answer("allow_once", card) }, "Allow once"),
    el("button", { type: "button", "data-decision": "allow_for_session", onclick: () => answer("allow_for_session", card) }, forSession),
    el("button", { type: "button", class: "deny", "data-decision": "deny", onclick: () => answer("deny", card) }, "Deny")));
  return card;
}

async function pollApprovals() {
  let approvals;
  try { approvals = (await api("GET", "/api/approvals")).approvals; } catch { return; }
  const key = (list) => list.map((a) => a.request_id).join(",");
  const mine = approvals.filter((a) => a.session_id === state.sessionId);
  const others = approvals.filter((a) => a.session_id !== state.sessionId);
  const badge = $("other-approvals");
  badge.hidden = others.length === 0;
  badge.textContent = `${others.length} approval${others.length === 1 ? "" : "s"} waiting in other sessions`;
  badge.onclick = () => others.length && selectSession(others[0].session_id);
  if (key(mine) !== key(state.approvals.filter((a) => a.session_id === state.sessionId))) {
    const box = clear($("approvals"));
    for (const a of mine) box.append(approvalCard(a));
  }
  state.approvals = approvals;
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
      el("strong", {}, `${c.agent_type || "child"} ${c.purpose || ""}`), " ",
      el("span", { class: "muted" }, `run ${c.child_run_id} · ${c.status}`),
      c.result_summary ? el("div", {}, short(c.result_summary, 400)) : null));
  }
  renderTasks(replay.tasks || []);
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
    body.append(el("tr", { class: `${debug ? "debug " : ""}level-${ev.level}`, "data-type": ev.event_type },
      el("td", {}, ev.seq ?? ""), el("td", {}, ev.run_seq ?? ""), el("td", {}, time(ev.created_at)),
      el("td", {}, ev.event_type), el("td", {}, ev.level), el("td", {}, short(ev.run_id || "", 24)),
      el("td", { class: "payload" }, short(JSON.stringify(ev.payload), 400))));
  }
  $("timeline-count").textContent = `${shown} of ${(replay.events || []).length} events`;
}

// ---- shell -------------------------------------------------------------------------------------------

function render() {
  for (const view of ["conversation", "tree", "agents", "timeline"]) $(`view-${view}`).hidden = view !== state.view;
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === state.view);
  const usage = state.replay?.usage;
  $("usage").textContent = usage && usage.runs ? `session usage: ${usageText(usage)}` : "";
  if (state.view === "conversation") renderConversation();
  if (state.view === "tree") renderTree();
  if (state.view === "agents") renderAgents();
  if (state.view === "timeline") renderTimeline();
}

async function init() {
  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => { state.view = tab.dataset.view; render(); });
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
    clear($("approvals"));
    render(); loadSessions();
    $("message").focus();
  });
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
  setInterval(pollApprovals, 1000);
  setInterval(() => { if (!state.live) loadSessions(); }, 4000);
  pollApprovals();
}

document.addEventListener("DOMContentLoaded", init);
