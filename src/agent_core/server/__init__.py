"""``soong-agent serve``: the HTTP API, durable approvals and the web UI (surfaces.md §2).

Imported only by the ``serve`` command (Starlette, uvicorn and sse-starlette are never loaded by
``import agent_core``). Private submodules: ``_app`` (ASGI app), ``_state`` (the server
process's runtime, broker and feeds), ``_routes`` (API handlers), ``_models`` (request/response bodies),
``_errors`` (error responses), ``_auth`` (token and same-origin checks), ``_sse`` (run event streams),
``_approvals`` (durable permission requests), ``_openapi`` (the OpenAPI document); the UI's static files
live in ``static/``. Imports point one way: ``_app`` → ``_routes``/``_openapi`` → ``_models``/``_errors``.
"""
