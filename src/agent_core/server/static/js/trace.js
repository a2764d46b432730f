// The trace view: a waterfall of one run (GET /api/sessions/{id}/trace): the run, its model calls and tool
// calls as bars on a time axis, child runs nested under the call that started them, durations, tokens
// (cache reads), cost, retries, errors and prompt cache breaks marked; a row unfolds into its figures.
// The raw event table (filters, debug events) is one click away.

import { $, clear, cost, duration, el, errorText, num, short, textOf, time, usageText } from "./dom.js";
import { api } from "./api.js";
import { state } from "./store.js";

const DEBUG_ONLY = new Set((
  "context_built prompt_cache_break model_started model_text_delta tool_call_delta model_completed provider_debug " +
  "permission_failed hook_started hook_completed hook_failed child_agent_cancel_requested " +
  "child_agent_cancel_timeout child_result_schema_validation_failed compact_pending compact_started " +
  "compact_completed compact_failed memory_extraction_started memory_extraction_completed " +
  "memory_extraction_failed mcp_server_failed").split(" "));

const view = { runId: null, raw: false, open: new Set(), loading: null };

export async function loadTrace() {
  const sid = state.sessionId && !state.newSession ? state.sessionId : null;
  if (!sid) { state.trace = null; renderTrace(); return; }
  if (view.loading) return;
  view.loading = api("GET", `/api/sessions/${encodeURIComponent(sid)}/trace`)
    .then((data) => { if (state.sessionId === sid) state.trace = data; })
    .catch((err) => { state.trace = { session_id: sid, error: err.message, runs: [] }; })
    .finally(() => { view.loading = null; if (state.view === "trace") renderTrace(); });
  await view.loading;
}

// ---- time axis ----------------------------------------------------------------------------------------

const ms = (iso) => (iso ? Date.parse(iso) : NaN);

function scaleOf(run) {
  const start = ms(run.start);
  let end = ms(run.end);
  if (Number.isNaN(end)) end = Math.max(Date.now(), start + 1);
  const span = Math.max(1, end - start);
  return { start, end, span, x: (t) => Math.min(100, Math.max(0, ((t - start) / span) * 100)) };
}

function niceStep(total) {
  const raw = total / 5;
  const pow = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) || raw;
}

function axis(scale) {
  const step = niceStep(scale.span);
  const ticks = el("div", { class: "wf-ticks" });
  for (let t = 0; t <= scale.span + 1; t += step) {
    const tick = el("span", { class: "wf-tick" }, t === 0 ? "0" : duration(t));
    tick.style.setProperty("--x", `${(t / scale.span) * 100}%`);
    ticks.append(tick);
  }
  return el("div", { class: "wf-row wf-axis", "aria-hidden": "true" }, el("div", { class: "wf-label muted" }, "time since the run started"), el("div", { class: "wf-track" }, ticks));
}

// ---- rows ---------------------------------------------------------------------------------------------

function bar(scale, startIso, endIso, cls) {
  const left = scale.x(ms(startIso));
  const end = Number.isNaN(ms(endIso)) ? scale.end : ms(endIso);
  const width = Math.max(0.4, scale.x(end) - left);
  const b = el("div", { class: `wf-bar ${cls}` });
  b.style.setProperty("--l", `${left}%`);
  b.style.setProperty("--w", `${Math.min(width, 100 - left)}%`);
  return b;
}

function markAt(scale, mark) {
  const m = el("span", { class: "wf-mark", "data-kind": mark.kind, title: mark.label });
  m.style.setProperty("--x", `${scale.x(ms(mark.at))}%`);
  return m;
}

function details(pairs) {
  return el("dl", { class: "wf-detail" }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== "").map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function row(scale, { kind, depth, label, sub, figures, status, start, end, badges, marks, detail, attrs }) {
  const key = `${kind}:${attrs["data-key"]}`;
  const labelBox = el("div", { class: "wf-label" }, el("span", { class: "wf-name" }, label), sub ? el("span", { class: "wf-sub muted" }, sub) : null, badges);
  labelBox.style.setProperty("--depth", String(depth));
  const track = el("div", { class: "wf-track" }, bar(scale, start, end, `${kind} ${status}`), (marks || []).map((m) => markAt(scale, m)));
  const head = el("div", { class: `wf-row ${kind} ${status}`, "data-kind": kind, "data-depth": String(depth), "data-status": status, role: "button", tabindex: "0", "aria-expanded": view.open.has(key) ? "true" : "false", ...attrs },
    labelBox, track, el("div", { class: "wf-figs muted" }, figures));
  const box = el("div", { class: "wf-item" }, head);
  const more = el("div", { class: "wf-more", hidden: !view.open.has(key) }, view.open.has(key) ? detail() : null);
  box.append(more);
  const toggle = () => {
    const open = more.hidden;
    if (open && !more.childElementCount) more.append(detail());
    more.hidden = !open;
    head.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) view.open.add(key); else view.open.delete(key);
  };
  head.addEventListener("click", toggle);
  head.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); } });
  return box;
}

const badge = (cls, text, title) => el("span", { class: `badge ${cls}`, title: title || text }, text);

function tokensLine(u) {
  if (!u) return "";
  const read = u.cache_read_tokens ? ` (${num(u.cache_read_tokens)} cached)` : "";
  return `${num(u.input_tokens)}${read} → ${num(u.output_tokens)}`;
}

function modelRow(scale, s, depth) {
  const badges = [];
  if (s.retries) badges.push(badge("retry", `↻ ${s.retries}`, `retried ${s.retries}×: ${s.retry_errors.map((r) => r.status_code || r.code).join(", ")}`));
  if (s.cache_break) badges.push(badge("cache-break", "cache break", `prompt cache break in ${s.cache_break.part} at ${s.cache_break.first_changed}`));
  if (s.status === "failed") badges.push(badge("bad", "failed"));
  const figures = [duration(s.duration_ms), tokensLine(s.usage), s.usage?.cost_usd != null ? cost(s.usage.cost_usd) : ""].filter(Boolean).join(" · ");
  const u = s.usage || {};
  return row(scale, {
    kind: "model", depth, status: s.status, start: s.start, end: s.end, badges, figures,
    label: `model ${s.model || ""}`.trim(), sub: s.turn ? `turn ${s.turn}` : "",
    attrs: { "data-key": `${s.run_id}:${s.start}`, "data-run": s.run_id },
    detail: () => details([
      ["provider / model", `${s.provider || "?"} / ${s.model || "?"}`],
      ["duration", duration(s.duration_ms)],
      ["stop reason", s.stop_reason],
      ["input tokens", s.usage ? `${num(u.input_tokens)} (uncached ${num(u.uncached_input_tokens)}${u.cache_read_tokens != null ? `, cache read ${num(u.cache_read_tokens)}` : ""}${u.cache_write_tokens != null ? `, cache write ${num(u.cache_write_tokens)}` : ""})` : ""],
      ["output tokens", s.usage ? `${num(u.output_tokens)}${u.reasoning_tokens ? ` (reasoning ${num(u.reasoning_tokens)})` : ""}` : ""],
      ["cost", u.cost_usd != null ? cost(u.cost_usd) : "no price configured"],
      ["retries", s.retries ? s.retry_errors.map((r) => `attempt ${r.attempt}: ${r.status_code || ""} ${r.code || r.error_type || ""}, waited ${duration(r.backoff_ms)}`).join("; ") || String(s.retries) : ""],
      ["prompt cache break", s.cache_break ? `${s.cache_break.part} at ${s.cache_break.first_changed}: ${s.cache_break.reused_messages} of ${s.cache_break.previous_messages} earlier messages reused${s.cache_break.cause ? ` (context ${s.cache_break.cause})` : ""}` : ""],
      ["error", s.error ? errorText(s.error) : ""],
    ]),
  });
}

function toolRow(scale, s, depth) {
  const badges = [];
  if (s.asked) badges.push(badge("asked", "approved", "the user was asked before it ran"));
  if (s.status === "failed" || s.status === "denied") badges.push(badge("bad", s.status));
  return row(scale, {
    kind: "tool", depth, status: s.status, start: s.start, end: s.end, badges,
    label: s.tool_name, sub: short(s.args_summary, 80), figures: duration(s.duration_ms),
    attrs: { "data-key": s.tool_call_id, "data-tool": s.tool_name, "data-call": s.tool_call_id },
    detail: () => details([
      ["arguments", short(s.args_summary, 2000)],
      ["duration", duration(s.duration_ms)],
      ["status", s.status],
      ["error", s.error ? errorText(s.error) : ""],
      ["child runs", s.children.length ? s.children.map((c) => c.run_id).join(", ") : ""],
    ]),
  });
}

function runLabel(run, depth) {
  if (depth === 0) return "run";
  return `↳ ${run.agent_type || "child"}${run.purpose && run.purpose !== run.agent_type ? ` ${run.purpose}` : ""}`;
}

function runRows(scale, run, depth, out) {
  const badges = [];
  const errors = run.marks.filter((m) => m.kind === "error").length;
  if (errors) badges.push(badge("bad", `${errors} error${errors === 1 ? "" : "s"}`));
  if (run.queued_ms) badges.push(badge("queued", `queued ${duration(run.queued_ms)}`));
  const figures = [duration(run.duration_ms), tokensLine(run.usage), run.usage?.cost_usd != null ? cost(run.usage.cost_usd) : ""].filter(Boolean).join(" · ");
  out.push(row(scale, {
    kind: "run", depth, status: run.status, start: run.start, end: run.end, badges, figures, marks: run.marks,
    label: runLabel(run, depth), sub: `${run.status}${run.end_reason && run.end_reason !== "completed" ? ` (${run.end_reason})` : ""}`,
    attrs: { "data-key": run.run_id, "data-run": run.run_id },
    detail: () => details([
      ["run", run.run_id], ["agent", `${run.agent_type || ""} ${run.agent_id}`.trim()],
      ["status", `${run.status}${run.end_reason ? ` · ${run.end_reason}` : ""}`], ["duration", duration(run.duration_ms)],
      ["usage", usageText(run.usage)], ["marks", run.marks.map((m) => `${time(m.at)} ${m.label}`).join("; ")],
    ]),
  }));
  for (const s of run.spans) {
    if (s.kind === "model") out.push(modelRow(scale, s, depth + 1));
    else {
      out.push(toolRow(scale, s, depth + 1));
      for (const child of s.children) runRows(scale, child, depth + 2, out);
    }
  }
  for (const child of run.children) runRows(scale, child, depth + 1, out);
}

// ---- the view -----------------------------------------------------------------------------------------

function count(run, kind, acc = { model: 0, tool: 0, retries: 0, errors: 0, breaks: 0, children: 0 }) {
  acc.errors += run.marks.filter((m) => m.kind === "error").length;
  for (const s of run.spans) {
    if (s.kind === "model") { acc.model++; acc.retries += s.retries; if (s.cache_break) acc.breaks++; }
    else { acc.tool++; for (const c of s.children) { acc.children++; count(c, kind, acc); } }
  }
  for (const c of run.children) { acc.children++; count(c, kind, acc); }
  return acc;
}

// The usage of a run and every run below it (the run's own record counts its agent only).
function treeUsage(run, acc = { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cost_usd: null }) {
  const u = run.usage;
  if (u) {
    acc.input_tokens += u.input_tokens;
    acc.output_tokens += u.output_tokens;
    acc.cache_read_tokens += u.cache_read_tokens || 0;
    if (u.cost_usd != null) acc.cost_usd = (acc.cost_usd || 0) + u.cost_usd;
  }
  for (const s of run.spans) if (s.kind === "tool") for (const c of s.children) treeUsage(c, acc);
  for (const c of run.children) treeUsage(c, acc);
  return acc;
}

function firstMessage(runId) {
  const node = (state.replay?.nodes || []).find((n) => n.run_id === runId && n.role === "user" && n.node_type === "message");
  return node ? textOf(node.content) : "";
}

function renderWaterfall(box, trace) {
  const runs = trace.runs || [];
  if (!runs.length) { box.append(el("p", { class: "muted" }, "No runs in this session yet.")); return; }
  if (!runs.some((r) => r.run_id === view.runId)) view.runId = runs[runs.length - 1].run_id;
  const index = runs.findIndex((r) => r.run_id === view.runId);
  const run = runs[index];
  const picker = el("select", { id: "trace-run", "aria-label": "run" }, runs.map((r, i) => el("option", { value: r.run_id, selected: r.run_id === view.runId },
    `#${i + 1} · ${time(r.start)} · ${short(firstMessage(r.run_id) || r.run_id, 60)}`)));
  picker.addEventListener("change", () => { view.runId = picker.value; renderTrace(); });
  const step = (d) => el("button", { type: "button", class: "small", disabled: !runs[index + d], onclick: () => { view.runId = runs[index + d].run_id; renderTrace(); } }, d < 0 ? "‹ earlier" : "later ›");
  const c = count(run);
  const summary = [
    `${run.status}${run.end ? "" : " (running)"}`, duration(run.duration_ms),
    `${c.model} model call${c.model === 1 ? "" : "s"}${c.retries ? ` (${c.retries} retr${c.retries === 1 ? "y" : "ies"})` : ""}`,
    `${c.tool} tool call${c.tool === 1 ? "" : "s"}`, `${usageText(treeUsage(run))}${c.children ? " with its child runs" : ""}`,
    c.breaks ? `${c.breaks} prompt cache break${c.breaks === 1 ? "" : "s"}` : "", c.errors ? `${c.errors} error${c.errors === 1 ? "" : "s"}` : "",
  ].filter(Boolean).join(" · ");
  box.append(el("div", { class: "trace-head" }, step(-1), picker, step(1)), el("p", { class: "trace-summary" }, summary));
  const scale = scaleOf(run);
  const rows = [];
  runRows(scale, run, 0, rows);
  box.append(el("div", { class: "wf", role: "list" }, axis(scale), rows),
    el("p", { class: "muted legend" }, el("span", { class: "key-swatch run" }), " run ", el("span", { class: "key-swatch model" }), " model call ",
      el("span", { class: "key-swatch tool" }), " tool call ", el("span", { class: "key-swatch failed" }), " failed · ◆ a mark (error, retry, cache break, compaction) · click a row for its figures"));
}

export function renderTrace() {
  $("trace-waterfall").hidden = view.raw;
  $("raw-events").hidden = !view.raw;
  $("show-waterfall").setAttribute("aria-pressed", view.raw ? "false" : "true");
  $("show-raw").setAttribute("aria-pressed", view.raw ? "true" : "false");
  if (view.raw) { renderTimeline(); return; }
  const box = clear($("trace-waterfall"));
  const trace = state.trace;
  if (!state.replay) { box.append(el("p", { class: "muted" }, "Select a session.")); return; }
  if (!trace || trace.session_id !== state.sessionId) { box.append(el("p", { class: "muted" }, "Loading…")); loadTrace(); return; }
  if (trace.error) { box.append(el("p", { class: "error" }, trace.error)); return; }
  renderWaterfall(box, trace);
}

export function showRaw(raw) { view.raw = raw; renderTrace(); }

// ---- the raw event table ---------------------------------------------------------------------------------

// A request that stopped repeating the agent's previous one: where, and how much of it was still reused.
function cacheBreakText(payload) {
  const p = payload || {};
  const cause = p.cause ? ` (context ${p.cause})` : "";
  return `prompt cache break in ${p.part} at ${p.first_changed}, turn ${p.turn}: ` +
    `${p.reused_messages} of ${p.previous_messages} earlier messages reused${cause}`;
}

export function renderTimeline() {
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
    body.append(el("tr", { class: `${debug ? "debug " : ""}${cacheBreak ? "cache-break " : ""}level-${ev.level}`, "data-type": ev.event_type },
      el("td", {}, ev.seq ?? ""), el("td", {}, ev.run_seq ?? ""), el("td", {}, time(ev.created_at)),
      el("td", {}, ev.event_type), el("td", {}, ev.level), el("td", {}, short(ev.run_id || "", 24)),
      el("td", { class: "payload" }, cacheBreak ? cacheBreakText(ev.payload) : short(JSON.stringify(ev.payload), 400))));
  }
  $("timeline-count").textContent = `${shown} of ${(replay.events || []).length} events`;
}
