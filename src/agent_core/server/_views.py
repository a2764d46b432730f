"""Read-only API views for the web UI: a session's trace and the resolved configuration.

* ``GET /api/sessions/{session_id}/trace``: the session's runs as a tree of timed spans (model calls, tool
  calls, child runs, marks), built from its stored events (:mod:`agent_core.server._trace`);
* ``GET /api/config``: where the server runs (project, home, config file), the main model and the resolved
  settings with every secret masked (:func:`agent_core.config._redacted.redacted_config`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_core.config._pricing import configured_prices
from agent_core.config._redacted import redacted_config
from agent_core.config.loader import LoadedConfig
from agent_core.server._routes import _json, _known_session, _state
from agent_core.server._trace import build_trace

if TYPE_CHECKING:
    from agent_core.server._state import ServerState


def _config(state: ServerState) -> LoadedConfig:
    return state.runtime._config


async def session_trace(request: Request) -> Response:
    state = _state(request)
    session_id = request.path_params["session_id"]
    await _known_session(state, session_id)
    replay = await state.runtime.replay_session(session_id)
    runs, nodes, events = list(replay.runs), list(replay.nodes), list(replay.events)
    for child in replay.children:  # the session replay holds the root agent's runs; children one by one
        part = await state.runtime.replay_run(child.child_run_id)
        runs += part.runs
        nodes += part.nodes
        events += part.events
    whole = replay.model_copy(update={"runs": runs, "nodes": nodes, "events": events})
    return _json(build_trace(whole, configured_prices(_config(state))))


async def resolved_config(request: Request) -> Response:
    config = _config(_state(request))
    view: dict[str, Any] = redacted_config(config)
    model = view["settings"]["model"]
    view["model"] = {
        "provider": model["provider"],
        "name": model["name"],
        "context_window": model["context_window"],
        "base_url": model["base_url"],
    }
    return _json(view)


VIEW_ROUTES = [
    Route("/api/config", resolved_config, methods=["GET"]),
    Route("/api/sessions/{session_id}/trace", session_trace, methods=["GET"]),
]
