"""``soong-agent serve``: the HTTP API, durable approvals and the web UI (surfaces.md §2).

Imported only by the ``serve`` command (Starlette, uvicorn and sse-starlette are never loaded by
``import agent_core``). Private submodules: ``_app`` (ASGI app, server state), ``_routes`` (API),
``_auth`` (token and same-origin checks), ``_sse`` (run event streams), ``_approvals`` (durable
permission requests), ``_openapi`` (the OpenAPI document); the UI's static files live in ``static/``.
"""
