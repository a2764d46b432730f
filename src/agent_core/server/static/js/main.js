// soong-agent serve web UI: the shell. ES modules, no build step, no external assets; the Markdown
// libraries are vendored (static/vendor). This module wires the views together: the session list, the
// tabs, the composer, the sidebar that folds away on narrow screens and the keyboard shortcuts.

import { $, clear, el, short, time } from "./dom.js";
import { api, features, loadFeatures } from "./api.js";
import { LIVE_STATUSES, setHooks, sessionMode, state } from "./store.js";
import { renderConversation } from "./conversation.js";
import { cancelRun, followRun, send, setLiveHooks, stopLive } from "./live.js";
import { answerFirstApproval, renderApprovals, watchRequests } from "./approvals.js";
import { loadTrace, renderTrace, renderTimeline, showRaw } from "./trace.js";
import { renderTree } from "./tree.js";
import { loadTeam, renderAgents } from "./agents.js";
import { loadPools, renderPools } from "./pools.js";
import { loadConfig, openSettings, renderHeader } from "./header.js";
import { clearState } from "./runstate.js";

const VIEWS = ["conversation", "trace", "tree", "agents", "pools"];
const narrow = () => window.matchMedia("(max-width: 760px)").matches;

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
      tabindex: "0",
      onclick: () => selectSession(s.session_id),
      onkeydown: (e) => { if (e.key === "Enter") selectSession(s.session_id); },
    },
    el("span", { class: "title" }, s.parent_session_id ? el("span", { class: "fork-mark" }, "⑂ ") : null, short(s.title || "(no message)", 120)),
    el("span", { class: "meta" }, `${s.mode} · ${s.status || "no runs"} · ${time(s.updated_at)}`)));
  }
}

async function selectSession(sessionId) {
  state.newSession = false;
  if (state.sessionId !== sessionId && state.live) { stopLive(); clearState(); }
  if (state.sessionId !== sessionId) state.trace = null;
  state.sessionId = sessionId;
  history.replaceState(null, "", sessionId ? `#${sessionId}` : "#");
  showSidebar(false);
  await loadSession();
  await loadSessions();
  if (state.view === "agents") await loadTeam();
  if (state.view === "trace") await loadTrace();
}

async function loadSession() {
  if (!state.sessionId) { state.replay = null; render(); return; }
  try {
    state.replay = await api("GET", `/api/sessions/${encodeURIComponent(state.sessionId)}`);
  } catch (err) {
    if (err.status === 404) { state.sessionId = null; state.replay = null; }
  }
  render();
  const live = (state.replay?.runs || []).find((r) => !r.parent_run_id && LIVE_STATUSES.has(r.status));
  if (live && (!state.live || state.live.done || state.live.runId !== live.run_id)) followRun(live.run_id, state.sessionId);
}

// ---- the shell ---------------------------------------------------------------------------------------

function render() {
  for (const view of VIEWS) $(`view-${view}`).hidden = view !== state.view;
  for (const tab of document.querySelectorAll(".tab")) {
    const on = tab.dataset.view === state.view;
    tab.classList.toggle("active", on);
    tab.setAttribute("aria-selected", on ? "true" : "false");
  }
  renderHeader();
  if (state.view === "conversation") renderConversation();
  if (state.view === "tree") renderTree();
  if (state.view === "agents") renderAgents();
  if (state.view === "trace") renderTrace();
  if (state.view === "pools") renderPools();
  renderApprovals();
  renderComposerExtras();
  $("message").placeholder = sessionMode() === "orchestrator"
    ? "Message the Orchestrator; @<worker> addresses a worker (Enter to send, Shift+Enter for a new line)"
    : "Message the agent (Enter to send, Shift+Enter for a new line)";
}

// The permission mode of the next run and "carry out the plan", when the server has permission modes.
function renderComposerExtras() {
  $("permission-mode-box").hidden = !features.permissionModes.length;
  const runs = (state.replay?.runs || []).filter((r) => !r.parent_run_id);
  const last = runs[runs.length - 1];
  const show = Boolean(features.permissionModes.length && last && last.permission_mode === "plan" && last.status === "completed" && !(state.live && !state.live.done));
  const button = $("approve-plan");
  button.hidden = !show;
  button.onclick = () => { $("permission-mode").value = "default"; $("message").value = "Carry out the plan."; $("composer").requestSubmit(); };
}

function setView(view) {
  state.view = view;
  render();
  if (view === "pools") loadPools();
  if (view === "agents") loadTeam();
  if (view === "trace") loadTrace();
}

function showSidebar(show) {
  document.body.classList.toggle("sidebar-open", show);
  $("toggle-sidebar").setAttribute("aria-expanded", show ? "true" : "false");
}

async function afterRun(sessionId) {
  if (sessionId && state.sessionId === sessionId) await loadSession();
  await loadSessions();
  if (state.view === "pools") await loadPools();
  if (state.view === "trace") await loadTrace();
}

// ---- keyboard ----------------------------------------------------------------------------------------

const typing = (target) => target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));

function onKey(e) {
  if (e.key === "Escape") {
    if ($("settings").open) return;  // the dialog closes itself
    if (document.body.classList.contains("sidebar-open")) { showSidebar(false); return; }
    if (state.live && !state.live.done) { e.preventDefault(); cancelRun(); }
    return;
  }
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $("composer").requestSubmit(); return; }
  if (e.altKey && !e.ctrlKey && !e.metaKey) {
    const decision = { Digit1: "allow_once", Digit2: "allow_for_session", Digit3: "deny" }[e.code];
    if (decision && answerFirstApproval(decision)) { e.preventDefault(); return; }
    const view = { KeyC: "conversation", KeyT: "trace", KeyN: "tree" }[e.code];
    if (view) { e.preventDefault(); setView(view); return; }
  }
  if (e.key === "/" && !typing(e.target) && !e.ctrlKey && !e.metaKey && !e.altKey) {
    e.preventDefault();
    setView("conversation");
    $("message").focus();
  }
}

// ---- start -------------------------------------------------------------------------------------------

async function init() {
  setHooks({ render, selectSession });
  setLiveHooks({
    afterRun, sessionsChanged: loadSessions, onApprovalsChange: renderApprovals,
    onPoolsChange: () => { if (state.view === "pools") loadPools(); },
  });
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => setView(tab.dataset.view));
  $("composer").addEventListener("submit", send);
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.ctrlKey && !e.metaKey && !e.isComposing) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  $("cancel-run").addEventListener("click", cancelRun);
  $("new-session").addEventListener("click", () => {
    stopLive();
    clearState();
    state.sessionId = null; state.replay = null; state.trace = null; state.newSession = true;
    history.replaceState(null, "", "#");
    showSidebar(false);
    setView("conversation");
    loadSessions();
    $("message").focus();
  });
  $("new-mode").addEventListener("change", () => render());
  $("debug-toggle").addEventListener("change", (e) => { state.debug = e.target.checked; renderTimeline(); });
  for (const id of ["filter-type", "filter-run", "filter-level"]) $(id).addEventListener("input", () => renderTimeline());
  $("show-raw").addEventListener("click", () => showRaw(true));
  $("show-waterfall").addEventListener("click", () => showRaw(false));
  $("toggle-sidebar").addEventListener("click", () => showSidebar(!document.body.classList.contains("sidebar-open")));
  $("scrim").addEventListener("click", () => showSidebar(false));
  $("open-settings").addEventListener("click", openSettings);
  $("close-settings").addEventListener("click", () => $("settings").close());
  document.addEventListener("keydown", onKey);
  await loadFeatures();
  try {
    const health = await api("GET", "/api/health");
    $("version").textContent = `v${health.version}`;
  } catch { /* the auth banner says why */ }
  loadConfig();
  const fromHash = decodeURIComponent(location.hash.slice(1));
  await loadSessions();
  if (fromHash) await selectSession(fromHash);
  else { render(); if (!narrow() || !state.sessions.length) showSidebar(false); }
  watchRequests();
  setInterval(() => { if (!state.live) loadSessions(); }, 4000);
  setInterval(() => { if (state.view === "pools") loadPools(); }, 2000);
  setInterval(() => { if (state.view === "agents") loadTeam(); }, 2000);
  setInterval(() => { if (state.view === "trace" && state.live && !state.live.done) loadTrace(); }, 2000);
}

init();
