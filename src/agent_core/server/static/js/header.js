// The header (project, provider and model, the session's usage and cost) and the settings panel: where
// the server runs and the resolved configuration with every secret masked (GET /api/config), plus the
// keyboard shortcuts.

import { $, clear, cost, el, num } from "./dom.js";
import { api, features } from "./api.js";
import { state } from "./store.js";

export const SHORTCUTS = [
  ["Enter", "send the message (Shift+Enter: a new line)"],
  ["Ctrl+Enter", "send, from anywhere"],
  ["Esc", "stop the running run (closes this panel or the session list first)"],
  ["Alt+1 / Alt+2 / Alt+3", "answer the first permission request: allow once / allow for session / deny"],
  ["/", "go to the message box"],
  ["Alt+C / Alt+T / Alt+N", "conversation / trace / node tree"],
];

export async function loadConfig() {
  if (!features.config) return;
  try { state.config = await api("GET", "/api/config"); } catch { state.config = null; }
  renderHeader();
}

const base = (path) => String(path || "").replace(/[\\/]+$/, "").split(/[\\/]/).pop() || String(path || "");

export function renderHeader() {
  const c = state.config;
  const project = $("project");
  const model = $("model");
  project.hidden = !c;
  model.hidden = !c;
  if (c) {
    project.textContent = base(c.project);
    project.title = `project: ${c.project}`;
    model.textContent = `${c.model.provider} · ${c.model.name}`;
    model.title = `provider ${c.model.provider}, model ${c.model.name}, context window ${num(c.model.context_window)} tokens`;
  }
  const usage = state.replay?.usage;
  const line = $("session-usage");
  line.hidden = !(usage && usage.runs);
  if (usage && usage.runs) {
    const cached = usage.cache_read_tokens ? ` (${num(usage.cache_read_tokens)} cached)` : "";
    line.textContent = `session: ${num(usage.input_tokens)}${cached} in · ${num(usage.output_tokens)} out${usage.cost_usd != null ? ` · ${cost(usage.cost_usd)}` : ""}`;
    line.title = `${usage.runs} run${usage.runs === 1 ? "" : "s"} (children included): input ${num(usage.input_tokens)} tokens (uncached ${num(usage.uncached_input_tokens)}${usage.cache_read_tokens != null ? `, cache read ${num(usage.cache_read_tokens)}` : ""}${usage.cache_write_tokens != null ? `, cache write ${num(usage.cache_write_tokens)}` : ""}), output ${num(usage.output_tokens)}${usage.cost_usd != null ? `, ${cost(usage.cost_usd)}` : ", no price configured"}`;
  }
}

// One config section as rows of key and value (nested tables indented; lists and objects as JSON).
function sectionRows(value, prefix = "") {
  const rows = [];
  for (const [key, item] of Object.entries(value || {})) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (item && typeof item === "object" && !Array.isArray(item) && Object.keys(item).length && Object.values(item).some((v) => v && typeof v === "object")) {
      rows.push(...sectionRows(item, name));
    } else {
      const text = typeof item === "string" ? item : JSON.stringify(item);
      rows.push(el("tr", { "data-key": name }, el("th", {}, name), el("td", { class: text === "\"[REDACTED]\"" || text === "[REDACTED]" ? "redacted" : "" }, text)));
    }
  }
  return rows;
}

function settingsBody() {
  const c = state.config;
  const body = [];
  if (!c) {
    body.push(el("p", { class: "muted" }, features.config ? "Loading…" : "This server does not show its configuration."));
  } else {
    body.push(el("h3", {}, "Attached to"), el("table", { class: "kv" }, el("tbody", {},
      [["project", c.project], ["home", c.home], ["config file", c.config_path], ["session store", c.session_db_path],
        ["provider", c.model.provider], ["model", c.model.name], ["context window", `${num(c.model.context_window)} tokens`], ["base url", c.model.base_url || "(provider default)"]]
        .map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))))));
    if (c.environment?.length) {
      body.push(el("h3", {}, "Secrets (by environment variable)"), el("table", { class: "kv" }, el("tbody", {},
        c.environment.map((e) => el("tr", {}, el("th", {}, e.name), el("td", {}, `${e.set ? "set" : "not set"} · named by ${e.key}`))))));
    }
    body.push(el("h3", {}, "Resolved settings"), el("p", { class: "muted" }, "Defaults filled in and paths expanded; secret values are shown as [REDACTED]."));
    for (const [section, value] of Object.entries(c.settings || {})) {
      const details = el("details", { class: "config-section", "data-section": section }, el("summary", {}, `[${section}]`));
      const rows = value && typeof value === "object" && !Array.isArray(value) ? sectionRows(value) : [el("tr", {}, el("td", {}, JSON.stringify(value)))];
      details.append(el("div", { class: "table-wrap" }, el("table", { class: "kv" }, el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { class: "muted" }, "(empty)"))))));
      body.push(details);
    }
  }
  body.push(el("h3", {}, "Keyboard shortcuts"), el("table", { class: "kv" }, el("tbody", {}, SHORTCUTS.map(([k, v]) => el("tr", {}, el("th", {}, el("kbd", {}, k)), el("td", {}, v))))));
  body.push(el("p", { class: "muted" }, "The colours follow the system setting (light or dark)."));
  return body;
}

export function openSettings() {
  const dialog = $("settings");
  clear($("settings-body")).append(...settingsBody());
  if (!dialog.open) dialog.showModal();
  if (!state.config && features.config) loadConfig().then(() => { if (dialog.open) clear($("settings-body")).append(...settingsBody()); });
}
