// Requests that wait for the user: permission approvals (allow once / for session / deny, with the whole
// argv, the diff and what "allow for session" remembers) and, when the server has them, questions of
// internal.ask_user. Both are pushed over SSE (a snapshot, then every change) and shown as cards in the
// open session; requests of other sessions are counted in the header badge.

import { $, el } from "./dom.js";
import { api, features, readStream } from "./api.js";
import { argvView, diffView, visibleText } from "./format.js";
import { resumeAfterUser, showWaitingForUser } from "./runstate.js";
import { selectSession, state } from "./store.js";

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

async function answerApproval(a, decision, card, content) {
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  try {
    await api("POST", `/api/approvals/${encodeURIComponent(a.request_id)}`, content ? { decision, content } : { decision });
    card.replaceChildren(el("p", { class: "muted" }, `${decision.replace(/_/g, " ")}: ${a.tool_name}`));
  } catch (err) {
    card.replaceChildren(el("p", { class: "error" }, err.status === 409 ? `already ${err.message.split(" ").pop()}` : err.message));
  }
  // the pushed approval_answered / approval_expired removes the card on every client
}

// An MCP server's question (elicitation): one input per field of its schema; Send answers allow_once with
// the values as `content`, Decline answers deny.
function elicitationCard(a, meta) {
  const card = el("div", { class: "approval elicitation", "data-request": a.request_id, role: "group", "aria-label": `question of MCP server ${meta.server_id}` });
  card.append(el("h4", {}, `MCP server ${meta.server_id} asks`), el("p", {}, visibleText(String(meta.message || ""))));
  if (meta.url) {  // only http(s) links: a server must not get a javascript: URL clicked
    const url = String(meta.url);
    const link = /^https?:\/\//i.test(url) ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, url) : visibleText(url);
    card.append(el("p", {}, "Open: ", link));
  }
  const schema = meta.requested_schema || {};
  const required = new Set(schema.required || []);
  const inputs = [];
  for (const [name, spec] of Object.entries(schema.properties || {})) {
    const kind = spec.type || "string";
    let input;
    if (Array.isArray(spec.enum)) input = el("select", { name }, spec.enum.map((o) => el("option", { value: String(o) }, String(o))));
    else if (kind === "boolean") input = el("input", { type: "checkbox", name });
    else input = el("input", { type: kind === "integer" || kind === "number" ? "number" : "text", name, step: kind === "number" ? "any" : "1" });
    inputs.push([name, kind, input]);
    card.append(el("label", { class: "field" }, `${name}${required.has(name) ? " *" : ""} `, input, spec.description ? el("span", { class: "muted" }, ` ${spec.description}`) : null));
  }
  const send = () => {
    const content = {};
    for (const [name, kind, input] of inputs) {
      if (kind === "boolean") { content[name] = input.checked; continue; }
      if (input.value === "") continue;
      content[name] = kind === "integer" ? parseInt(input.value, 10) : kind === "number" ? Number(input.value) : input.value;
    }
    answerApproval(a, "allow_once", card, content);
  };
  card.append(el("div", { class: "actions" },
    el("button", { type: "button", class: "primary", "data-decision": "allow_once", onclick: send }, meta.url ? "Done" : "Send"),
    el("button", { type: "button", class: "deny", "data-decision": "deny", onclick: () => answerApproval(a, "deny", card) }, "Decline")));
  return card;
}

function approvalCard(a) {
  const meta = a.metadata || {};
  if (meta.mcp_request === "elicitation") return elicitationCard(a, meta);
  const card = el("div", { class: "approval", "data-request": a.request_id, role: "group", "aria-label": `permission request for ${a.tool_name}` });
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
  const button = (decision, label, key, cls) => el("button", {
    type: "button", class: cls, "data-decision": decision, title: `Alt+${key}`, onclick: () => answerApproval(a, decision, card),
  }, label, el("kbd", { class: "key" }, `Alt+${key}`));
  card.append(el("div", { class: "actions" },
    button("allow_once", "Allow once", "1", "primary"),
    button("allow_for_session", forSession, "2", ""),
    button("deny", "Deny", "3", "deny")));
  return card;
}

// Answers the open session's first pending approval from the keyboard (Alt+1 / Alt+2 / Alt+3).
export function answerFirstApproval(decision) {
  const card = $("approvals").querySelector(".approval[data-request]:not(.elicitation)");  // a form needs its values
  const a = card && state.approvals.get(card.dataset.request);
  if (!a || card.querySelector("button:disabled")) return false;
  answerApproval(a, decision, card);
  return true;
}

function syncCards(box, cls, items, make) {
  const shown = new Map([...box.querySelectorAll(`.${cls}`)].map((c) => [c.dataset.request, c]));
  for (const [id, card] of shown) if (!items.some((a) => a.request_id === id)) card.remove();
  for (const a of items) if (!shown.has(a.request_id)) box.append(make(a));
}

// Shows the pending requests of the open session as cards (kept while still pending, so an answer in
// progress is not redrawn), counts the other sessions' in the header badge, and tells the run state.
export function renderApprovals() {
  const pending = [...state.approvals.values()];
  const mine = pending.filter((a) => a.session_id === state.sessionId);
  const others = pending.filter((a) => a.session_id !== state.sessionId);
  const otherQuestions = [...state.questions.values()].filter((q) => q.session_id !== state.sessionId);
  const waiting = others.length + otherQuestions.length;
  const badge = $("other-approvals");
  badge.hidden = waiting === 0;
  badge.textContent = others.length
    ? `${others.length} approval${others.length === 1 ? "" : "s"} waiting in other sessions`
    : `${otherQuestions.length} question${otherQuestions.length === 1 ? "" : "s"} waiting in other sessions`;
  badge.onclick = () => { const first = others[0] || otherQuestions[0]; if (first) selectSession(first.session_id); };
  syncCards($("approvals"), "approval", mine, approvalCard);
  renderQuestions();
  const questions = [...state.questions.values()].filter((q) => q.session_id === state.sessionId);
  const live = state.live && !state.live.done && state.live.sessionId === state.sessionId;
  if (live && mine.length) showWaitingForUser("approval", `${mine[0].tool_name} waits for your answer below (Alt+1 allow once · Alt+2 for session · Alt+3 deny)`);
  else if (live && questions.length) showWaitingForUser("question", "the agent asks you something below");
  else resumeAfterUser();
}

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
  syncCards($("questions"), "question", mine, questionCard);
}

// ---- the push streams ----------------------------------------------------------------------------------

// A stream is reopened after a drop (a fresh snapshot resynchronises).
async function watchPending(kind, key) {
  let delay = 500;
  for (;;) {
    try {
      await readStream(`/api/${kind}s/events`, (data, name) => {
        delay = 500;
        if (name === `${kind}s`) state[key] = new Map(data[`${kind}s`].map((a) => [a.request_id, a]));
        else if (name === `${kind}_pending`) state[key].set(data.request_id, data);
        else if (name === `${kind}_answered` || name === `${kind}_expired`) state[key].delete(data.request_id);
        else return;
        renderApprovals();
      });
    } catch { /* reconnect below */ }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 8000);
  }
}

export function watchRequests() {
  watchPending("approval", "approvals");
  if (features.questions) watchPending("question", "questions");
}
