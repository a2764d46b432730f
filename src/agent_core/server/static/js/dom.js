// DOM and formatting helpers shared by every view.
// Safety rule of the whole UI: every string that comes from the model, a tool, a file or storage goes into
// the page as text (text nodes / textContent). Only markdown.js parses HTML (Markdown rendered, then
// sanitised by DOMPurify into a fragment); no module assigns innerHTML, outerHTML or insertAdjacentHTML.

export function el(tag, attrs, ...children) {
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

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const $ = (id) => document.getElementById(id);
export const clear = (node) => { node.replaceChildren(); return node; };
export const short = (text, n) => { const s = String(text ?? ""); return s.length > n ? s.slice(0, n - 1) + "…" : s; };
export const time = (iso) => { try { return new Date(iso).toLocaleTimeString(); } catch { return String(iso); } };

export function textOf(blocks) {
  return (blocks || []).filter((b) => b.type === "text").map((b) => b.text).join("");
}

export function reasoningOf(blocks) {
  return (blocks || []).filter((b) => b.type === "reasoning" && b.text).map((b) => b.text).join("\n\n");
}

// ---- numbers -----------------------------------------------------------------------------------------

export const num = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "?");

export function duration(ms) {
  if (typeof ms !== "number") return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function cost(usd) {
  if (typeof usd !== "number") return "";
  return usd >= 0.01 ? `$${usd.toFixed(2)}` : `$${usd.toFixed(4)}`;
}

// Input is split into its uncached part and what the provider's prompt cache read and wrote.
export function usageText(u) {
  if (!u) return "";
  const parts = [];
  if (u.input_tokens !== undefined) {
    const split = [];
    if (u.cache_read_tokens || u.cache_write_tokens) {
      const uncached = u.uncached_input_tokens ??
        Math.max(0, u.input_tokens - (u.cache_read_tokens || 0) - (u.cache_write_tokens || 0));
      split.push(`uncached ${num(uncached)}`);
      if (u.cache_read_tokens) split.push(`cache read ${num(u.cache_read_tokens)}`);
      if (u.cache_write_tokens) split.push(`cache write ${num(u.cache_write_tokens)}`);
    }
    parts.push(`in ${num(u.input_tokens)}${split.length ? ` (${split.join(", ")})` : ""}`);
  }
  if (u.output_tokens !== undefined) parts.push(`out ${num(u.output_tokens)}`);
  if (u.cost_usd !== undefined && u.cost_usd !== null) parts.push(cost(Number(u.cost_usd)));
  return parts.join(" · ");
}

// A fold: a header button that shows and hides a body built on first open (so long results cost nothing
// until asked for). Returns {root, header, body, open(), close(), toggle()}.
export function fold(header, build, { open = false, cls = "" } = {}) {
  const body = el("div", { class: "fold-body", hidden: true });
  const root = el("div", { class: `fold ${cls}` }, header, body);
  let built = false;
  const set = (show) => {
    if (show && !built) { built = true; body.append(...[build()].flat().filter(Boolean)); }
    body.hidden = !show;
    header.setAttribute("aria-expanded", show ? "true" : "false");
    root.classList.toggle("open", show);
  };
  header.setAttribute("aria-expanded", "false");
  header.addEventListener("click", (e) => { if (!e.target.closest("a")) set(body.hidden); });
  if (open) set(true);
  return { root, header, body, open: () => set(true), close: () => set(false), toggle: () => set(body.hidden) };
}

// The text of an error payload ({code, message}).
export const errorText = (e) => (e && typeof e === "object" ? `${e.code || "error"}: ${e.message || ""}` : String(e || "error"));
