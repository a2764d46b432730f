// How tool arguments and results read: a one-line summary, formatted arguments, the result as formatted
// JSON, text or a diff, artifacts and images linked. Everything goes in as text (or through codeBlock).

import { el, num, short } from "./dom.js";
import { artifactUrl, features } from "./api.js";
import { codeBlock, languageOf } from "./markdown.js";

// ---- visible whitespace (approval cards, command arguments) -------------------------------------------

// Whitespace and invisible characters an argument could hide code behind (a run of spaces that pushes the
// rest out of view, a newline, a tab, a bidi override, a zero-width space) become visible marker spans.
const HIDDEN_TEXT = /( {2,}|^ | $|[\t\n\r\v\f\u0085\u00a0\u1680\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]|[\u0000-\u0008\u000e-\u001f\u007f])/g;

function visibleMarker(chunk) {
  if (chunk[0] === " ") return chunk.length === 1 ? "␠" : `␠×${chunk.length}`;
  const names = { "\t": "⇥tab", "\n": "↵newline", "\r": "␍CR" };
  return names[chunk] || `U+${chunk.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}

export function visibleText(text) {
  const parts = [];
  let last = 0;
  const value = String(text);
  for (const match of value.matchAll(HIDDEN_TEXT)) {
    if (match.index > last) parts.push(value.slice(last, match.index));
    parts.push(el("span", { class: "ws", title: "whitespace or invisible character" }, visibleMarker(match[0])));
    last = match.index + match[0].length;
  }
  if (last < value.length) parts.push(value.slice(last));
  return parts;
}

// A command's whole argv, one argument per item, wrapped, whitespace made visible (as the CLI shows it).
export function argvView(argv, cls) {
  return el("ol", { class: `argv ${cls || ""}` }, argv.map((arg) => el("li", {}, visibleText(arg))));
}

// ---- diffs and JSON ---------------------------------------------------------------------------------

export function diffView(diff) {
  const pre = el("pre", { class: "diff" });
  for (const line of String(diff).split("\n")) {
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    pre.append(el("span", { class: cls }, line || " "));
  }
  return pre;
}

const looksLikeDiff = (text) => typeof text === "string" && /^(?:---|\+\+\+|@@|diff --git)/m.test(text) && /^@@/m.test(text);

export function jsonView(value, cls = "") {
  let text;
  try { text = JSON.stringify(value, null, 2); } catch { text = String(value); }
  return codeBlock(text, "json", `json ${cls}`.trim());
}

// ---- one-line summaries ---------------------------------------------------------------------------------

function parseArgs(args) {
  if (args && typeof args === "object") return args;
  try { const parsed = JSON.parse(String(args)); return parsed && typeof parsed === "object" ? parsed : null; } catch { return null; }
}

const quoteArg = (a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a));

// One line saying what a call does: `path`, `argv`, `"query" in dir`, else `key: value, …`.
export function argsSummary(tool, args) {
  const a = parseArgs(args);
  if (!a) return short(String(args ?? ""), 160).replace(/\s+/g, " ");
  const name = String(tool || "");
  if (Array.isArray(a.argv)) return short(a.argv.map(quoteArg).join(" "), 160);
  if (name.endsWith("write_file") && a.path) return `${a.path} · ${num(String(a.content ?? "").length)} characters`;
  if (name.endsWith("edit_file") && a.path) return `${a.path} · ${Array.isArray(a.edits) ? `${a.edits.length} edit${a.edits.length === 1 ? "" : "s"}` : "diff"}`;
  if (name.endsWith("search") && a.query !== undefined) return `"${short(a.query, 60)}" in ${a.path || "."}`;
  if (a.path !== undefined && Object.keys(a).length <= 3) return String(a.path);
  for (const key of ["task", "instruction", "message", "question", "name"]) {
    if (typeof a[key] === "string") return short(a[key], 160).replace(/\s+/g, " ");
  }
  return short(Object.entries(a).map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", "), 160).replace(/\s+/g, " ");
}

// ---- unfolded arguments -------------------------------------------------------------------------------

function editsDiff(edits) {
  const lines = [];
  edits.forEach((edit, i) => {
    lines.push(`@@ edit ${i + 1}${edit.replace_all ? " (every occurrence)" : ""} @@`);
    for (const line of String(edit.old ?? "").split("\n")) lines.push(`-${line}`);
    for (const line of String(edit.new ?? "").split("\n")) lines.push(`+${line}`);
  });
  return lines.join("\n");
}

export function argsView(tool, args) {
  const a = parseArgs(args);
  const box = el("div", { class: "tool-args" });
  if (!a) { box.append(el("pre", { class: "plain" }, String(args ?? ""))); return box; }
  const rest = { ...a };
  if (Array.isArray(a.argv)) {
    box.append(el("div", { class: "label" }, "argv"), argvView(a.argv.map(String)));
    delete rest.argv;
  } else if (typeof a.content === "string" && a.path) {
    box.append(el("div", { class: "label" }, `content of ${a.path}`), codeBlock(a.content, languageOf(a.path)));
    delete rest.content;
  } else if (Array.isArray(a.edits)) {
    box.append(el("div", { class: "label" }, `changes to ${a.path || "the file"}`), diffView(editsDiff(a.edits)));
    delete rest.edits;
  } else if (typeof a.unified_diff === "string") {
    box.append(el("div", { class: "label" }, "diff"), diffView(a.unified_diff));
    delete rest.unified_diff;
  }
  if (Object.keys(rest).length) box.append(jsonView(rest));
  return box;
}

// ---- results ------------------------------------------------------------------------------------------

export function artifactChip(ref) {
  const label = [ref.filename || ref.artifact_id, ref.mime_type, ref.size_bytes ? `${num(ref.size_bytes)} bytes` : ""].filter(Boolean).join(" · ");
  const media = /^(image\/(png|jpeg|gif|webp)|application\/pdf)$/.test(ref.mime_type || "");
  const body = features.artifacts && media
    ? el("a", { href: artifactUrl(ref.artifact_id), target: "_blank", rel: "noopener noreferrer" }, label)
    : el("span", {}, label);
  return el("span", { class: "artifact", "data-artifact": ref.artifact_id, title: ref.summary || "" }, "artifact ", body,
    ref.summary ? el("span", { class: "muted" }, ` — ${short(ref.summary, 200)}`) : null);
}

// Images and documents of a message or a tool result (served by /api/artifacts/{id} when the server has it).
export function mediaOf(blocks) {
  const out = [];
  for (const b of blocks || []) {
    if (b.type === "image") {
      out.push(features.artifacts
        ? el("img", { class: "attachment", src: artifactUrl(b.artifact_id), alt: `image ${b.artifact_id}` })
        : el("span", { class: "artifact" }, `image ${b.artifact_id}`));
    } else if (b.type === "document") {
      out.push(features.artifacts
        ? el("a", { class: "attachment", href: artifactUrl(b.artifact_id), target: "_blank", rel: "noopener noreferrer" }, `document ${b.artifact_id}`)
        : el("span", { class: "artifact" }, `document ${b.artifact_id}`));
    } else if (b.type === "tool_result") out.push(...mediaOf(b.content));
  }
  return out;
}

// A command's result: its exit status, then stdout and stderr as text.
function commandView(data) {
  const box = el("div", { class: "command-result" });
  box.append(el("div", { class: `label exit ${data.exit_code === 0 ? "ok" : "bad"}` }, `exit status ${data.exit_code}`));
  for (const stream of ["stdout", "stderr"]) {
    const text = typeof data[stream] === "string" ? data[stream] : data[stream]?.text;
    if (text) box.append(el("div", { class: "label" }, stream), el("pre", { class: `plain ${stream}` }, text));
  }
  const rest = Object.fromEntries(Object.entries(data).filter(([k, v]) => !["exit_code", "stdout", "stderr"].includes(k) && v !== null && v !== false));
  if (Object.keys(rest).length) box.append(jsonView(rest));
  return box;
}

function jsonResult(data, tool) {
  if (data && typeof data === "object" && "exit_code" in data && ("stdout" in data || "stderr" in data)) return commandView(data);
  if (data && typeof data === "object" && typeof data.content === "string") {
    const rest = { ...data };
    delete rest.content;
    return el("div", {}, jsonView(rest), el("div", { class: "label" }, data.path ? `content of ${data.path}` : "content"),
      codeBlock(data.content, languageOf(data.path)));
  }
  const diffs = data && typeof data === "object" ? Object.entries(data).filter(([, v]) => looksLikeDiff(v)) : [];
  if (diffs.length) {
    const rest = Object.fromEntries(Object.entries(data).filter(([, v]) => !looksLikeDiff(v)));
    return el("div", {}, jsonView(rest), diffs.map(([k, v]) => [el("div", { class: "label" }, k), diffView(v)]));
  }
  return jsonView(data);
}

// The whole result block of a call (its content blocks, or its error).
export function resultView(block, tool) {
  const box = el("div", { class: `tool-result${block.is_error ? " error" : ""}` });
  if (block.error) box.append(el("p", { class: "error" }, `${block.error.code}: ${block.error.message}`));
  for (const b of block.content || []) {
    if (b.type === "text") box.append(looksLikeDiff(b.text) ? diffView(b.text) : el("pre", { class: "plain" }, b.text));
    else if (b.type === "json") box.append(jsonResult(b.data, tool));
    else if (b.type === "artifact_ref") box.append(artifactChip(b));
  }
  const media = mediaOf(block.content);
  if (media.length) box.append(el("div", { class: "tool-media" }, media));
  if (!box.childElementCount) box.append(el("p", { class: "muted" }, "(empty result)"));
  return box;
}

// One line of a result (the folded card's hint).
export function resultLine(block) {
  if (!block) return "";
  if (block.error) return `${block.error.code}: ${block.error.message}`;
  return (block.content || []).map((b) => b.type === "text" ? b.text
    : b.type === "json" ? (b.summary || JSON.stringify(b.data))
    : b.type === "artifact_ref" ? `[artifact ${b.artifact_id}] ${b.summary || ""}` : "").join(" ");
}
