"""``soong-agent serve``: the HTTP API, durable approvals and the web UI (docs/serve.md#approvals).

Imported only by the ``serve`` command (Starlette, uvicorn and sse-starlette are never loaded by
``import agent_core``). Private submodules: ``_app`` (ASGI app), ``_state`` (the server
process's runtime, broker and feeds), ``_routes`` (API handlers), ``_models`` (request/response bodies),
``_errors`` (error responses), ``_auth`` (token and same-origin checks), ``_sse`` (run event streams),
``_approvals`` (durable permission requests), ``_openapi`` (the OpenAPI document); the UI's static files
live in ``static/``. Imports point one way: ``_app`` → ``_routes``/``_openapi`` → ``_models``/``_errors``.

Embedding: ``open_state(runtime, broker, questions)`` opens a runtime built with
``permission_callback=broker.callback`` (an :class:`ApprovalBroker`) and ``question_callback=questions.callback``
(a :class:`QuestionBroker`), ``create_app(state, token)`` is the ASGI app, ``close_state(state)`` expires
pending approvals and questions and closes the runtime (``soong-agent serve`` is exactly this under uvicorn).
"""

from agent_core.server._app import create_app
from agent_core.server._approvals import ApprovalBroker, QuestionBroker
from agent_core.server._state import ServerState, close_state, open_state

__all__ = ["ApprovalBroker", "QuestionBroker", "ServerState", "close_state", "create_app", "open_state"]
