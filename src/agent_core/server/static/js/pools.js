// Worker pools: each worker's state (idle / busy / unavailable), its current run and step, the queued runs
// addressed to it; in an orchestrator session a click puts @<worker> into the message.

import { $, clear, el, short } from "./dom.js";
import { api } from "./api.js";
import { render, sessionMode, state } from "./store.js";

const poolsSession = () => (state.sessionId && !state.newSession ? state.sessionId : null);

function addressWorker(worker) {
  const box = $("message");
  const mention = `@${worker.worker_agent_id} `;
  if (!box.value.includes(mention)) box.value = mention + box.value;
  state.view = "conversation";
  render();
  box.focus();
}

export async function loadPools() {
  let data;
  const query = poolsSession() ? `?session_id=${encodeURIComponent(poolsSession())}` : "";
  try { data = await api("GET", `/api/pools${query}`); } catch (err) { $("pools").replaceChildren(el("p", { class: "error" }, err.message)); return; }
  state.pools = data;
  if (state.view === "pools") renderPools();
}

export function renderPools() {
  const box = clear($("pools"));
  const data = state.pools;
  if (!data || data.session_id !== poolsSession()) { box.append(el("p", { class: "muted" }, "Loading…")); return; }
  const orchestrator = sessionMode() === "orchestrator";
  box.append(el("p", { class: "muted" }, data.session_id ? "Workers' state in this session. " : "Workers' state in any session. ",
    orchestrator ? "In this orchestrator session a message may address a worker with @<worker>: the Orchestrator is asked to dispatch it."
      : "Addressing a worker with @<worker> works in orchestrator-mode sessions."));
  if (!data.pools.length) box.append(el("p", { class: "muted" }, "No worker pools are configured ([[agents.worker_pools]] in config.toml)."));
  const queuedFor = (w) => data.queued_runs.filter((q) => q.addressed_workers.some((a) => a.worker_pool_id === w.worker_pool_id && a.worker_agent_id === w.worker_agent_id));
  for (const pool of data.pools) {
    const card = el("div", { class: `pool${pool.valid ? "" : " invalid"}`, "data-pool": pool.pool_id },
      el("h4", {}, `pool ${pool.pool_id}`, pool.default ? el("span", { class: "chip" }, "default") : null,
        pool.valid ? null : el("span", { class: "chip bad" }, "invalid")));
    for (const problem of pool.problems) card.append(el("p", { class: "error" }, problem));
    if (pool.workers.length) {
      const body = el("tbody");
      for (const w of pool.workers) {
        const queued = queuedFor(w);
        body.append(el("tr", { "data-worker": w.worker_agent_id },
          el("td", {}, el("strong", {}, `@${w.worker_agent_id}`), el("div", { class: "muted" }, w.name)),
          el("td", {}, el("span", { class: `status ${w.status}` }, w.status)),
          el("td", {}, w.current_run_id ? `run ${w.current_run_id}${w.current_step_id ? ` · step ${w.current_step_id}` : ""}` : "—"),
          el("td", { class: "queued" }, queued.length ? `${queued.length} queued: ${queued.map((q) => q.run_id).join(", ")}` : "none"),
          el("td", { class: "muted" }, short(w.description, 120)),
          el("td", {}, el("button", { type: "button", class: "address", disabled: !orchestrator, onclick: () => addressWorker(w) }, `@${w.worker_agent_id}`))));
      }
      card.append(el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, el("tr", {}, ["worker", "state", "current run", "queued runs", "description", "address"].map((h) => el("th", {}, h)))), body)));
    }
    box.append(card);
  }
  if (data.queued_runs.length) {
    box.append(el("h4", {}, "Queued runs"), el("ul", {}, data.queued_runs.map((q) => el("li", {},
      `${q.run_id} (session ${q.session_id})`, q.addressed_workers.map((a) => el("span", { class: "chip" }, `→ @${a.worker_agent_id}`))))));
  }
}
