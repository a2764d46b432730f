// A tool call as a folded card: one line (name, a summary of the arguments, status, duration); unfolded,
// the formatted arguments and the result; the child runs the call started nest below it.
//
//   <div class="toolbox" data-call data-tool data-status>
//     <button class="tool STATUS" aria-expanded>▸ name  summary  status  duration</button>
//     <div class="tool-body" hidden>arguments, result, artifacts</div>
//     <div class="nested">child agents (created on demand)</div>
//   </div>

import { duration, el, errorText, short } from "./dom.js";
import { argsSummary, argsView, artifactChip, resultLine, resultView } from "./format.js";

const STATUS_TEXT = { running: "running", ok: "done", failed: "failed", denied: "denied" };

export function toolCard({ name, args, callId, child = false }) {
  const status = el("span", { class: "tstatus" }, "running");
  const took = el("span", { class: "tdur muted" });
  const hint = el("span", { class: "thint muted" });
  const header = el("button", { type: "button", class: `tool${child ? " child" : ""}`, "aria-expanded": "false" },
    el("span", { class: "chev", "aria-hidden": "true" }, "▸"),
    el("span", { class: "tname" }, name || "tool"),
    el("span", { class: "targs" }, argsSummary(name, args)),
    status, took, hint);
  const body = el("div", { class: "tool-body", hidden: true });
  const box = el("div", { class: "toolbox", "data-call": callId || "", "data-tool": name || "", "data-status": "running" }, header, body);
  const card = { name, args, result: null, summary: "", artifacts: [], error: null, dirty: true };

  const build = () => {
    card.dirty = false;
    const parts = [el("div", { class: "section-label" }, "arguments"), argsView(name, args)];
    parts.push(el("div", { class: "section-label" }, "result"));
    if (card.result) parts.push(resultView(card.result, name));
    else if (card.error) parts.push(el("p", { class: "error" }, card.error));
    else if (card.summary) parts.push(el("pre", { class: "plain" }, card.summary));
    else parts.push(el("p", { class: "muted" }, box.dataset.status === "running" ? "running…" : "(no result)"));
    if (card.artifacts.length) parts.push(el("div", { class: "artifacts" }, card.artifacts.map((id) => artifactChip({ artifact_id: id }))));
    body.replaceChildren(...parts);
  };
  const setOpen = (open) => {
    if (open && card.dirty) build();
    body.hidden = !open;
    header.setAttribute("aria-expanded", open ? "true" : "false");
    box.classList.toggle("open", open);
  };
  header.addEventListener("click", () => setOpen(body.hidden));

  box.line = header;
  box.toggle = () => setOpen(body.hidden);
  box.setStatus = (kind, info = {}) => {
    box.dataset.status = kind;
    header.classList.remove("ok", "failed", "denied", "running");
    header.classList.add(kind);
    status.textContent = STATUS_TEXT[kind] || kind;
    if (typeof info.duration_ms === "number") took.textContent = duration(info.duration_ms);
    if (info.error) card.error = info.error;
    if (info.hint) hint.textContent = short(info.hint, 140);
    card.dirty = true;
    if (!body.hidden) build();
  };
  box.setResult = (block) => {
    card.result = block;
    if (!hint.textContent) hint.textContent = short(resultLine(block).replace(/\s+/g, " "), 140);
    card.dirty = true;
    if (!body.hidden) build();
  };
  box.setLive = ({ summary, artifact_ids }) => {
    if (summary) { card.summary = summary; hint.textContent = short(String(summary).replace(/\s+/g, " "), 140); }
    if (Array.isArray(artifact_ids)) card.artifacts = artifact_ids;
    card.dirty = true;
    if (!body.hidden) build();
  };
  return box;
}


// The nested box under a call where its child runs go (created on first use).
export function nestIn(box) {
  if (!box.nest) { box.nest = el("div", { class: "nested" }); box.append(box.nest); }
  return box.nest;
}

// A call's outcome from its terminal event (tool_completed / tool_failed / tool_denied).
export function outcomeOf(ev) {
  const p = ev.payload || {};
  if (ev.event_type === "tool_completed") return ["ok", { duration_ms: p.duration_ms }];
  if (ev.event_type === "tool_denied") return ["denied", { error: `denied: ${p.reason || ""}`, hint: `denied: ${p.reason || ""}` }];
  return ["failed", { duration_ms: p.duration_ms, error: errorText(p.error), hint: errorText(p.error) }];
}
