// Agents & tasks: the session's runs with their usage, child agents, the Task DAG with step states, and
// the teammates of the session's team (state and unread inbox entries).

import { $, clear, el, short, svg, usageText } from "./dom.js";
import { api } from "./api.js";
import { selectSession, state } from "./store.js";
import { kindLabel } from "./conversation.js";

export function renderAgents() {
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

export async function loadTeam() {
  const sid = state.sessionId && !state.newSession ? state.sessionId : null;
  if (!sid) { state.team = null; return; }
  try {
    state.team = await api("GET", `/api/sessions/${encodeURIComponent(sid)}/team`);
  } catch (err) {
    state.team = { session_id: sid, error: err.message };
  }
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
  box.append(el("div", { class: "table-wrap" }, el("table", { id: "team-table" },
    el("thead", {}, el("tr", {}, ["name", "state", "inbox", "kind", "session"].map((h) => el("th", {}, h)))), body)));
}

// ---- the Task board ----------------------------------------------------------------------------------

function renderTasks(tasks) {
  const box = $("tasks");
  if (!tasks.length) { box.append(el("p", { class: "muted" }, "No Tasks in this session.")); return; }
  for (const view of tasks) {
    const task = view.task || {};
    const card = el("div", { class: "task", "data-task": view.task_id || "" },
      el("strong", {}, task.title || task.goal || view.task_id || "Task"), " ",
      el("span", { class: "muted" }, view.status || task.status || ""));
    if (view.error) card.append(el("p", { class: "error" }, view.error.message));
    card.append(el("div", { class: "dag-wrap" }, stepDag(task.steps || [])));
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
      svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-head" }))));
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
      svg("text", { x: 8, y: 36, class: "sub" }, `${s.step_id} · ${s.status}`)));
  }
  return root;
}
