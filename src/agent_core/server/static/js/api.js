// The serve API: JSON calls, event streams (fetch-based SSE) and the routes this server has.

import { $ } from "./dom.js";

export async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  $("auth-error").hidden = response.status !== 401;
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) {
    const error = new Error((data && data.error && data.error.message) || response.statusText);
    error.status = response.status;
    error.details = data?.error?.details;
    throw error;
  }
  return data;
}

// Reads a text/event-stream with fetch (cookie auth, every event type, no automatic reconnect):
// onEvent(data, eventName) for each message with data.
export async function readStream(path, onEvent, signal) {
  const response = await fetch(path, { credentials: "same-origin", signal });
  $("auth-error").hidden = response.status !== 401;
  if (!response.ok || !response.body) throw new Error(`event stream: HTTP ${response.status}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = [];
      let name = "message";
      for (const line of block.split("\n")) {
        if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        else if (line.startsWith("event:")) name = line.slice(6).trim();
      }
      if (data.length) {
        try { onEvent(JSON.parse(data.join("\n")), name); } catch (err) { console.error(err); }
      }
    }
  }
}

export function readEvents(runId, debug, onEvent, signal) {
  return readStream(`/api/runs/${encodeURIComponent(runId)}/events${debug ? "?debug=1" : ""}`, onEvent, signal);
}

// What this server offers beyond the basics, read once from its OpenAPI document (the UI works with an
// older or newer server: a feature shows only when its route exists).
export const features = { rewind: false, questions: false, artifacts: false, permissionModes: [], trace: false, config: false };

export async function loadFeatures() {
  try {
    const response = await fetch("/openapi.json", { credentials: "same-origin" });
    const doc = await response.json();
    const paths = doc.paths || {};
    features.rewind = Boolean(paths["/api/sessions/{session_id}/rewind"]?.post);
    features.questions = Boolean(paths["/api/questions/events"]?.get);
    features.artifacts = Boolean(paths["/api/artifacts/{artifact_id}"]?.get);
    features.trace = Boolean(paths["/api/sessions/{session_id}/trace"]?.get);
    features.config = Boolean(paths["/api/config"]?.get);
    const mode = doc.components?.schemas?.RunRequest?.properties?.permission_mode;
    const choices = (mode?.anyOf || [mode]).flatMap((s) => s?.enum || []);
    features.permissionModes = choices;
  } catch { /* an old server: the basics only */ }
  return features;
}

export const artifactUrl = (id) => `/api/artifacts/${encodeURIComponent(String(id || ""))}`;
