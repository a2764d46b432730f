// The UI's state (one object, shared by every module) and the hook that redraws the shell.

export const LIVE_STATUSES = new Set(["queued", "pending", "running"]);
export const TERMINAL = new Set(["run_completed", "run_cancelled", "loop_failed"]);

export const state = {
  sessions: [],
  sessionId: null,
  replay: null,
  view: "conversation",
  debug: false,
  live: null,              // the followed run: {runId, sessionId, abort, tools, lanes, items, done}
  lastRunId: null,         // the last run this page started
  approvals: new Map(),    // request_id -> pending approval (pushed)
  questions: new Map(),    // request_id -> pending question of internal.ask_user (pushed)
  pools: null,
  team: null,              // {session_id, teammates} of the selected session
  trace: null,             // GET /api/sessions/{id}/trace of the selected session
  config: null,            // GET /api/config
  expanded: new Set(),     // child run ids whose activity the conversation shows
  childEvents: new Map(),  // child run id -> its replayed events (finished children only)
  newSession: false,
};

// Tests and the browser console read it (window.state); nothing else depends on the global.
window.state = state;

const hooks = { render: () => {}, selectSession: async () => {} };

export function setHooks(more) { Object.assign(hooks, more); }
export const render = () => hooks.render();
export const selectSession = (id) => hooks.selectSession(id);

export function rootAgentId(replay) {
  const root = (replay?.runs || []).find((r) => !r.parent_run_id);
  return root ? root.agent_id : null;
}

export function activePath(replay) {
  const byId = new Map((replay?.nodes || []).map((n) => [n.node_id, n]));
  const path = [];
  let node = byId.get(replay?.active_node_id);
  while (node) { path.unshift(node); node = byId.get(node.parent_id); }
  return path;
}

export function sessionMode() {
  if (state.newSession || !state.sessionId) return document.getElementById("new-mode").value;
  return state.sessions.find((s) => s.session_id === state.sessionId)?.mode || "normal";
}
