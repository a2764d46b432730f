"""Secrets the process holds beyond whole environment values are redacted (issue 31 item 12).

The password inside a PostgreSQL DSN (a command may print it in another form than the env value) and
credentials written literally into ``mcp.json`` (an ``Authorization`` header, a ``*_TOKEN`` env entry).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from agent_core._api.wiring import config_secrets
from agent_core._mcp.catalog import McpCatalog, McpServerConfig
from agent_core._mcp.manager import McpManager
from agent_core._redaction import REDACTED, Redactor
from agent_core.config.schema import Settings
from agent_core.tools.registry import ToolRegistry


def _config(dsn_env: str | None) -> Any:
    return SimpleNamespace(
        settings=SimpleNamespace(storage=SimpleNamespace(postgres=SimpleNamespace(dsn_env=dsn_env)))
    )


def test_the_dsn_password_alone_is_redacted() -> None:
    """Case I12."""
    environ = {"APP_DSN": "postgresql://app:pw%2Ddb-9f8e7d6c@db.internal/app"}
    found = config_secrets(_config("APP_DSN"), environ)
    assert "pw-db-9f8e7d6c" in found and "pw%2Ddb-9f8e7d6c" in found
    keyword = config_secrets(_config("APP_DSN"), {"APP_DSN": "host=db user=app password='s3cr3t pass'"})
    assert keyword == ["s3cr3t pass"]
    redactor = Redactor(environ=environ)
    for secret in found:
        redactor.add_secret(secret)
    printed = "PGPASSWORD=pw-db-9f8e7d6c psql -h db.internal"
    assert redactor.text(printed) == f"PGPASSWORD={REDACTED} psql -h db.internal"
    assert config_secrets(_config(None), environ) == []


def test_literal_mcp_credentials_are_redacted(tmp_path: Path) -> None:
    """Case I12."""
    server = McpServerConfig(
        server_id="remote",
        transport="http",
        config_hash="0" * 64,
        tags=(),
        startup_timeout_ms=1000,
        timeout_ms=1000,
        url="http://127.0.0.1:9/mcp",
        headers={"Authorization": "Bearer mcp-literal-7a6b5c4d", "Accept": "application/json"},
    )
    local = McpServerConfig(
        server_id="local",
        transport="stdio",
        config_hash="1" * 64,
        tags=(),
        startup_timeout_ms=1000,
        timeout_ms=1000,
        command="/bin/true",
        env={"SERVICE_TOKEN": "svc-literal-1e2f3a4b", "LANG": "C.UTF-8"},
    )
    catalog = McpCatalog(path=tmp_path / "mcp.json", servers={"remote": server, "local": local})
    redactor = Redactor(environ={})
    McpManager(
        catalog,
        Settings.model_validate({"model": {"provider": "ollama", "name": "m"}}),
        registry=ToolRegistry(),
        redactor=redactor,
    )
    text = "auth: Bearer mcp-literal-7a6b5c4d / token svc-literal-1e2f3a4b / application/json C.UTF-8"
    assert redactor.text(text) == f"auth: {REDACTED} / token {REDACTED} / application/json C.UTF-8"
    assert redactor.text("mcp-literal-7a6b5c4d") == REDACTED
