// Markdown and code, rendered safely: the only module of the UI that parses HTML.
//
// markdown-it (vendor/markdown-it.min.js) renders with raw HTML off (HTML in model text stays text), images
// off (nothing is loaded from elsewhere) and links limited to http(s)/mailto by its own link check; code
// fences are highlighted by highlight.js (vendor/highlight.min.js); DOMPurify (vendor/purify.min.js) then
// sanitises the result against an allow-list of tags and attributes and returns a DOM fragment that the
// caller appends (no innerHTML here or anywhere else in the UI). Every link opens in a new tab without
// referrer or opener, and shows its target next to it when the text says something else.

import { el } from "./dom.js";

const TAGS = [
  "p", "br", "strong", "em", "del", "s", "code", "pre", "span", "a", "ul", "ol", "li", "blockquote",
  "h1", "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td", "sup", "sub",
];
const PURIFY = {
  ALLOWED_TAGS: TAGS,
  ALLOWED_ATTR: ["href", "title", "class", "start"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};
const SAFE_LINK = /^(?:https?:|mailto:)/i;
const CLASS_OK = /^(?:hljs(?:-[\w-]+)?|language-[\w+-]+|[\w-]+_)$/;

let engine = null;

function libs() {
  const { markdownit, DOMPurify, hljs } = window;
  if (!markdownit || !DOMPurify) return null;
  return { markdownit, DOMPurify, hljs };
}

function highlight(code, lang) {
  const hljs = window.hljs;
  if (!hljs || !lang || !hljs.getLanguage(lang)) return "";  // markdown-it escapes it as text
  try { return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value; } catch { return ""; }
}

function setup() {
  if (engine) return engine;
  const found = libs();
  if (!found) return null;
  const md = found.markdownit({ html: false, linkify: true, typographer: false, breaks: false, highlight });
  md.disable(["image"]);
  md.validateLink = (url) => SAFE_LINK.test(String(url).trim());
  const purify = found.DOMPurify;
  purify.addHook("uponSanitizeAttribute", (node, data) => {
    if (data.attrName === "class") data.attrValue = data.attrValue.split(/\s+/).filter((c) => CLASS_OK.test(c)).join(" ");
  });
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  });
  engine = { md, purify };
  return engine;
}

// Shows where a link goes when its text says something else (a link text is easy to fake).
function showTargets(fragment) {
  for (const a of fragment.querySelectorAll("a")) {
    const href = a.getAttribute("href");
    if (!href) { a.replaceWith(...a.childNodes); continue; }
    a.title = href;
    const text = a.textContent.trim();
    const bare = href.replace(/^mailto:/i, "");
    if (text === href || text === bare || `${text}/` === href) continue;
    let target = href;
    try { const u = new URL(href); target = u.protocol === "mailto:" ? bare : `${u.host}${u.pathname === "/" ? "" : u.pathname}`; } catch { /* shown whole */ }
    a.after(el("span", { class: "link-target" }, ` (${target.length > 80 ? target.slice(0, 79) + "…" : target})`));
  }
  for (const code of fragment.querySelectorAll("pre > code")) code.classList.add("hljs");
  return fragment;
}

// The sanitised fragment of `text` rendered as Markdown; plain text when the libraries are missing.
export function markdownFragment(text) {
  const e = setup();
  if (!e) return document.createTextNode(String(text ?? ""));
  const html = e.md.render(String(text ?? ""));
  return showTargets(e.purify.sanitize(html, PURIFY));
}

// A block `<div class="md">` with the rendered Markdown of `text`.
export function markdownBlock(text, cls = "") {
  const box = el("div", { class: `md ${cls}`.trim() });
  box.append(markdownFragment(text));
  return box;
}

// Re-renders `box` with `text` (streaming replies: at most every 60 ms, the last call always lands).
export function renderInto(box, text) {
  box.pendingText = text;
  if (box.renderTimer) return;
  const draw = () => {
    box.renderTimer = null;
    box.replaceChildren(markdownFragment(box.pendingText));
  };
  if (!box.lastDraw || Date.now() - box.lastDraw > 60) { box.lastDraw = Date.now(); draw(); return; }
  box.renderTimer = setTimeout(() => { box.lastDraw = Date.now(); draw(); }, 60);
}

// A highlighted code block (a file's content, a JSON result); plain text for an unknown language.
export function codeBlock(text, lang, cls = "") {
  const code = el("code", { class: "hljs" });
  const pre = el("pre", { class: `code ${cls}`.trim() }, code);
  const e = setup();
  const value = String(text ?? "");
  const html = lang && value.length < 200_000 ? highlight(value, lang) : "";
  if (e && html) code.append(e.purify.sanitize(html, { ...PURIFY, ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] }));
  else code.textContent = value;
  return pre;
}

// The highlight.js language of a file name, when it knows one.
export function languageOf(path) {
  const ext = String(path || "").split(/[\\/]/).pop().split(".").pop().toLowerCase();
  const map = { py: "python", js: "javascript", mjs: "javascript", ts: "typescript", md: "markdown", sh: "bash", yml: "yaml", rs: "rust", rb: "ruby", kt: "kotlin", h: "c", hpp: "cpp", cc: "cpp" };
  const lang = map[ext] || ext;
  return window.hljs && window.hljs.getLanguage(lang) ? lang : "";
}
