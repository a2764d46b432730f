"""OAuth 2.1 for a remote MCP server (issue 38 item 4): the official SDK's server over streamable HTTP on
127.0.0.1, acting as its own authorization server (metadata, dynamic client registration, authorize with
PKCE, token, refresh). The client registers, sends the user to the authorization URL once, stores the
tokens 0600 under the home (redacted everywhere, never logged), refreshes an expired token in the same
process and after a restart without asking again."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_core._mcp import McpManager, load_mcp_catalog
from agent_core._mcp.oauth import token_path
from agent_core._redaction import REDACTED, Redactor
from agent_core.config import load_config
from agent_core.tools.registry import ToolRegistry
from tests.fixtures.env import SoongEnv

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_full_server.py"
TTL_S = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def oauth_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port, log = free_port(), tmp_path / "auth.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SERVER),
            "--http",
            str(port),
            "--oauth",
            "--token-ttl",
            str(TTL_S),
            "--log",
            str(log),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise AssertionError("the OAuth MCP server did not start")
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class Browser:
    """Opens the authorization URL like a user's browser: follows the redirects back to the listener."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.visits: list[asyncio.Task[None]] = []

    async def __call__(self, server_id: str, url: str) -> None:
        self.opened.append(url)

        async def visit() -> None:
            async with httpx.AsyncClient(follow_redirects=True, timeout=10) as client:
                response = await client.get(url)
                assert response.status_code == 200, response.text

        self.visits.append(asyncio.create_task(visit()))  # the SDK waits for the redirect meanwhile


def manager_for(env: SoongEnv, url: str, browser: Browser, redactor: Redactor) -> McpManager:
    entry = {"type": "http", "url": url, "oauth": {"scopes": ["mcp"]}, "startup_timeout_ms": 60000}
    (env.home / "mcp.json").write_text(json.dumps({"mcpServers": {"docs": entry}}))
    env.write_config()
    config = load_config(home_dir=env.home, project_dir=env.project)
    return McpManager(
        load_mcp_catalog(config),
        config.settings,
        registry=ToolRegistry(),
        redactor=redactor,
        roots=[env.project],
        oauth_opener=browser,
    )


def lines(log: Path) -> list[str]:
    return [line.split(" ")[0] for line in log.read_text().splitlines()] if log.exists() else []


async def test_oauth_registration_pkce_storage_and_refresh(
    soong_env: SoongEnv, oauth_server: tuple[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    url, log = oauth_server
    caplog.set_level(logging.DEBUG)
    browser, redactor = Browser(), Redactor()
    manager = manager_for(soong_env, url, browser, redactor)
    try:
        assert await manager.ensure_connected(True) == set()
        assert "mcp.docs.echo" in {d.name for d in manager.definitions()}
        assert len(browser.opened) == 1 and "code_challenge_method=S256" in browser.opened[0]
        assert lines(log)[:3] == ["register", "authorize", "token"]
        assert "challenge=True" in log.read_text()

        stored = token_path(soong_env.home, "docs")
        assert stored.stat().st_mode & 0o777 == 0o600 and stored.parent.stat().st_mode & 0o777 == 0o700
        tokens = json.loads(stored.read_text())["tokens"]
        access, refresh = tokens["access_token"], tokens["refresh_token"]
        assert redactor.text(f"a {access} r {refresh}") == f"a {REDACTED} r {REDACTED}"

        await asyncio.sleep(TTL_S + 0.5)  # expired: the next request refreshes, nobody is asked
        assert next(r.uri for r in await manager.list_resources("docs")) == "notes://readme"
        assert lines(log).count("refresh") == 1 and len(browser.opened) == 1
        renewed = json.loads(stored.read_text())["tokens"]["access_token"]
        assert renewed != access
    finally:
        await manager.close()

    # a restart with an expired stored token refreshes it instead of asking again
    await asyncio.sleep(TTL_S + 0.5)
    restarted = manager_for(soong_env, url, browser, Redactor())
    try:
        assert await restarted.ensure_connected(True) == set()
        assert len(browser.opened) == 1 and lines(log).count("refresh") == 2
        assert lines(log).count("authorize") == 1
    finally:
        await restarted.close()

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert access not in logged and refresh not in logged and renewed not in logged
