// The node tree of a session as a tree: a linear run of messages stays in one column, only a branch point
// indents (each branch one step in, with a head saying which branch it is), the active path is
// highlighted, long linear runs collapse to their ends; a node can be made the active leaf (switch), be
// rewound to (files and conversation, when the server has it) or forked into a new session.

import { $, clear, el, short, textOf, time } from "./dom.js";
import { api, features } from "./api.js";
import { activePath, rootAgentId, selectSession, state } from "./store.js";

const KEEP_ENDS = 2;        // a collapsed run keeps this many nodes at each end
const MIN_COLLAPSED = 4;    // fewer hidden nodes than this are shown anyway
const expandedRuns = new Set();

function preview(n) {
  const text = textOf(n.content);
  if (text) return text.replace(/\s+/g, " ");
  const calls = (n.content || []).filter((b) => b.type === "tool_call").map((b) => b.name);
  if (calls.length) return `calls ${calls.join(", ")}`;
  const results = (n.content || []).filter((b) => b.type === "tool_result");
  if (results.length) return `${results.length} tool result${results.length === 1 ? "" : "s"}${results.some((r) => r.is_error) ? " (error)" : ""}`;
  return (n.content || []).map((b) => b.name || b.type).join(", ") || n.node_type;
}

function nodeRow(n, ctx) {
  const active = n.node_id === ctx.activeId;
  const actions = el("span", { class: "node-actions" },
    active ? el("span", { class: "muted active-mark" }, "active") : el("button", { type: "button", class: "switch", title: "make this the active leaf: the next message continues from it", onclick: () => switchTo(n.node_id) }, "Switch here"),
    features.rewind && !active && !n.metadata?.partial && !n.metadata?.failed
      ? el("button", { type: "button", class: "rewind", title: "put back the files the agent changed after this node, and continue from it", onclick: () => rewindTo(n.node_id) }, "Rewind to here") : null,
    n.role === "user" && n.node_type === "message"
      ? el("button", { type: "button", class: "fork", title: "copy the path up to this message into a new session", onclick: () => forkAt(n.node_id) }, "Fork") : null);
  return el("div", {
    class: `node role-${n.role}${ctx.onPath.has(n.node_id) ? " on-path" : ""}${active ? " active-leaf" : ""}`,
    "data-node": n.node_id, tabindex: "0",
  },
  el("span", { class: "role" }, n.node_type === "message" ? n.role : n.node_type),
  el("span", { class: "text", title: short(preview(n), 400) }, short(preview(n), 140)),
  actions,
  el("span", { class: "time muted" }, time(n.created_at)));
}

// A linear run of nodes: every node one row in the same column, the middle of a long run folded away
// (never the active leaf).
function chainRows(chain, ctx) {
  const out = [];
  const keep = (i) => i < KEEP_ENDS || i >= chain.length - KEEP_ENDS || chain[i].node_id === ctx.activeId;
  let i = 0;
  while (i < chain.length) {
    if (keep(i)) { out.push(nodeRow(chain[i], ctx)); i++; continue; }
    let j = i;
    while (j < chain.length && !keep(j)) j++;
    const hidden = chain.slice(i, j);
    const key = hidden[0].node_id;
    if (hidden.length < MIN_COLLAPSED || expandedRuns.has(key)) {
      out.push(...hidden.map((n) => nodeRow(n, ctx)));
      if (hidden.length >= MIN_COLLAPSED) out.push(el("button", { type: "button", class: "collapse-run", onclick: () => { expandedRuns.delete(key); renderTree(); } }, "fold these messages again"));
    } else {
      const onPath = hidden.filter((n) => ctx.onPath.has(n.node_id)).length;
      out.push(el("button", { type: "button", class: `collapsed-run${onPath ? " on-path" : ""}`, "data-count": String(hidden.length), onclick: () => { expandedRuns.add(key); renderTree(); } },
        `⋯ ${hidden.length} more messages (${time(hidden[0].created_at)} – ${time(hidden[hidden.length - 1].created_at)})`));
    }
    i = j;
  }
  return out;
}

function subtreeSize(id, ctx) {
  let size = 0;
  const stack = [id];
  while (stack.length) {
    const next = stack.pop();
    size++;
    stack.push(...(ctx.kids.get(next) || []).map((n) => n.node_id));
  }
  return size;
}

// From `start`, the linear run of nodes, then (at a branch point) each branch one step further in.
function chainFrom(start, container, ctx) {
  const chain = [];
  let node = start;
  for (;;) {
    chain.push(node);
    const next = ctx.kids.get(node.node_id) || [];
    if (next.length !== 1) break;
    node = next[0];
  }
  container.append(...chainRows(chain, ctx));
  const branches = ctx.kids.get(node.node_id) || [];
  if (branches.length > 1) container.append(branchGroup(branches, node.node_id, ctx));
}

// The branches at a branch point, each one step in, headed by which branch it is and how big.
function branchGroup(branches, atId, ctx) {
  const group = el("div", { class: "branches", "data-at": atId });
  branches.forEach((child, i) => {
    const active = ctx.onPath.has(child.node_id);
    const size = subtreeSize(child.node_id, ctx);
    const branch = el("div", { class: `branch${active ? " on-path" : ""}`, "data-branch": child.node_id },
      el("div", { class: "branch-head muted" }, `branch ${i + 1} of ${branches.length} · ${size} node${size === 1 ? "" : "s"}${active ? " · active path" : ""}`));
    chainFrom(child, branch, ctx);
    group.append(branch);
  });
  return group;
}

export function renderTree() {
  const box = clear($("tree"));
  const replay = state.replay;
  if (!replay) return;
  const root = rootAgentId(replay);
  const nodes = (replay.nodes || []).filter((n) => !root || n.agent_id === root).sort((a, b) => a.node_seq - b.node_seq);
  const known = new Set(nodes.map((n) => n.node_id));
  const kids = new Map();
  for (const n of nodes) {
    const parent = n.parent_id && known.has(n.parent_id) ? n.parent_id : "";
    kids.set(parent, [...(kids.get(parent) || []), n]);
  }
  const ctx = { kids, activeId: replay.active_node_id, onPath: new Set(activePath(replay).map((n) => n.node_id)) };
  const roots = kids.get("") || [];
  if (!roots.length) { box.append(el("p", { class: "muted" }, "No nodes yet.")); return; }
  const branchPoints = nodes.filter((n) => (kids.get(n.node_id) || []).length > 1).length;
  box.append(el("p", { class: "muted tree-summary" }, `${nodes.length} nodes · ${branchPoints ? `${branchPoints} branch point${branchPoints === 1 ? "" : "s"}` : "no branches"}`));
  const column = el("div", { class: "tree-column" });
  if (roots.length === 1) chainFrom(roots[0], column, ctx);
  else column.append(branchGroup(roots, "", ctx));
  box.append(column);
}

async function switchTo(nodeId) {
  try {
    await api("POST", `/api/sessions/${encodeURIComponent(state.sessionId)}/active`, { node_id: nodeId });
  } catch (err) { alert(err.message); return; }
  await selectSession(state.sessionId);
}

// Files and conversation back to a node (POST /api/sessions/{id}/rewind), after a confirmation; a refusal
// (a file changed since) lists the files and changes nothing.
async function rewindTo(nodeId) {
  if (!confirm("Rewind to here? The files the agent changed after this node are put back, and the conversation continues from it.")) return;
  let done;
  try {
    const result = await api("POST", `/api/sessions/${encodeURIComponent(state.sessionId)}/rewind`, { node_id: nodeId });
    const skipped = result.skipped || [];
    const left = skipped.length ? `, ${skipped.length} left alone (${skipped.map((s) => `${s.path}: ${s.reason}`).join("; ")})` : "";
    done = `rewound: ${(result.restored || []).length} file(s) restored, ${(result.removed || []).length} removed${left}`;
  } catch (err) {
    $("rewind-status").textContent = `rewind refused: ${err.message}`;
    alert(`Rewind refused, nothing was changed:\n${err.message}`);
    return;
  }
  await selectSession(state.sessionId);
  $("rewind-status").textContent = done; // once the session shows the rewound path
}

async function forkAt(nodeId) {
  try {
    const forked = await api("POST", `/api/sessions/${encodeURIComponent(state.sessionId)}/fork`, { node_id: nodeId });
    await selectSession(forked.session_id);
  } catch (err) { alert(err.message); }
}
