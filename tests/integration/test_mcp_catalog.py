"""mcp.json catalog loading, config hash and the pure tool/result mapping (docs/hooks-and-mcp.md; N1 project
file ignored, N6 names)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agent_core._mcp import config_hash, load_mcp_catalog
from agent_core._mcp.catalog import MCP_FILENAME, McpServerConfig
from agent_core._mcp.mapping import build_definitions, map_result, unmatched_overrides
from agent_core._mcp.remote import RemoteResult, RemoteTool
from agent_core.config.loader import LoadedConfig, load_config
from agent_core.config.schema import ToolOverride
from agent_core.errors import ConfigError, ErrorCode
from agent_core.types.content import ArtifactRefBlock, JsonBlock, TextBlock
from agent_core.types.model import ToolCall
from tests.fixtures.env import SoongEnv

OBJ = {"type": "object", "properties": {"q": {"type": "string"}}}


def loaded(env: SoongEnv, **config: Any) -> LoadedConfig:
    env.write_config(**config)
    return load_config(home_dir=env.home, project_dir=env.project)


def write_mcp(env: SoongEnv, data: Any) -> Path:
    return env.write_home(MCP_FILENAME, data if isinstance(data, str) else json.dumps(data))


def expect_error(env: SoongEnv, data: Any, *fragments: str, **config: Any) -> ConfigError:
    write_mcp(env, data)
    with pytest.raises(ConfigError) as info:
        load_mcp_catalog(loaded(env, **config))
    assert info.value.code == ErrorCode.config_error
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message
    return info.value


def test_missing_file_is_empty_and_project_files_are_ignored(soong_env: SoongEnv) -> None:
    """Case N1."""
    soong_env.write_project(".mcp.json", json.dumps({"mcpServers": {"p": {"command": "x"}}}))
    soong_env.write_project(".soong-agent/mcp.json", "{broken")
    catalog = load_mcp_catalog(loaded(soong_env))
    assert len(catalog) == 0 and catalog.path == soong_env.home / MCP_FILENAME


def test_catalog_defaults_and_placeholders(soong_env: SoongEnv) -> None:
    (soong_env.project / "srv").mkdir()
    write_mcp(
        soong_env,
        {
            "mcpServers": {
                "local": {
                    "command": "uvx",
                    "args": ["x"],
                    "cwd": "<project>/srv",
                    "env": {"A": "1"},
                    "tags": ["fs"],
                },
                "docs": {
                    "type": "http",
                    "url": "http://Docs.Example:8000/mcp",
                    "headers_env": {"Authorization": "TOK"},
                },
                "plain": {"type": "stdio", "command": "srv", "timeout_ms": 1234, "startup_timeout_ms": 99},
            }
        },
    )
    catalog = load_mcp_catalog(loaded(soong_env))
    local, docs, plain = (catalog.get(s) for s in ("local", "docs", "plain"))
    assert (
        isinstance(local, McpServerConfig)
        and isinstance(docs, McpServerConfig)
        and isinstance(plain, McpServerConfig)
    )
    assert local.transport == "stdio" and local.cwd == soong_env.project / "srv" and local.tags == ("fs",)
    assert (
        local.startup_timeout_ms == 30000 and local.timeout_ms == 10000
    )  # tools.default_timeout_ms of the baseline
    assert local.network_host is None
    assert docs.transport == "http" and docs.network_host == "docs.example" and docs.cwd is None
    assert plain.cwd == soong_env.project and plain.timeout_ms == 1234 and plain.startup_timeout_ms == 99


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        ({"mcpServers": {"s": {"command": "x", "bogus": 1}}}, ("bogus",)),
        ({"mcpServers": {"bad id": {"command": "x"}}}, ("bad id",)),
        ({"mcpServers": {"x" * 65: {"command": "x"}}}, ("64",)),
        ({"mcpServers": {"s": {"args": ["x"]}}}, ("s", "command")),
        ({"mcpServers": {"s": {"type": "http"}}}, ("s", "url")),
        ({"mcpServers": {"s": {"type": "http", "url": "http://h/mcp", "command": "x"}}}, ("s", "command")),
        ({"mcpServers": {"s": {"command": "x", "headers": {"a": "b"}}}}, ("s", "headers")),
        ({"mcpServers": {"s": {"type": "sse", "url": "http://h"}}}, ("type",)),
        ({"mcpServers": {"s": {"type": "http", "url": "ftp://h/x"}}}, ("s", "url")),
        ({"mcpServers": {"s": {"command": "x", "tags": ["Net"]}}}, ("s", "tags")),
        ({"mcpServers": {"s": {"command": "x", "env_allowlist": ["A-B"]}}}, ("A-B",)),
        ({"mcpServers": {"s": {"command": "x", "timeout_ms": 700000}}}, ("s", "max_timeout_ms")),
        ({"servers": {}}, ("mcpServers",)),
        ("{nope", ("invalid JSON",)),
    ],
)
def test_invalid_catalog_fails_startup(soong_env: SoongEnv, data: Any, fragments: tuple[str, ...]) -> None:
    error = expect_error(soong_env, data, *fragments)
    assert str(soong_env.home / MCP_FILENAME) in error.message


def test_override_for_unknown_server_is_a_config_error(soong_env: SoongEnv) -> None:
    write_mcp(soong_env, {"mcpServers": {"srv": {"command": "x"}}})
    overrides = {"mcp": {"tool_overrides": {"mcp.ghost.*": {"permission": "readonly"}}}}
    with pytest.raises(ConfigError) as info:
        load_mcp_catalog(loaded(soong_env, tools=overrides))
    assert "ghost" in info.value.message
    overrides = {"mcp": {"tool_overrides": {"mcp.srv.echo": {"tags": ["Bad"]}}}}
    with pytest.raises(ConfigError):
        load_mcp_catalog(loaded(soong_env, tools=overrides))
    ok = {"mcp": {"tool_overrides": {"mcp.srv.echo": {"permission": "readonly"}}}}
    assert len(load_mcp_catalog(loaded(soong_env, tools=ok))) == 1


def test_config_hash_changes_with_args_only() -> None:
    a = {"command": "python", "args": ["server.py", "--one"], "env": {"X": "1"}}
    b = {"command": "python", "args": ["server.py", "--two"], "env": {"X": "1"}}
    reordered = {"env": {"X": "1"}, "args": ["server.py", "--one"], "command": "python"}
    assert config_hash(a) != config_hash(b)
    assert config_hash(a) == config_hash(reordered)
    assert len(config_hash(a)) == 64


def _server(**kw: Any) -> McpServerConfig:
    base: dict[str, Any] = {
        "server_id": "srv",
        "transport": "stdio",
        "config_hash": "h",
        "tags": (),
        "startup_timeout_ms": 1000,
        "timeout_ms": 1000,
        "command": "x",
    }
    base.update(kw)
    return McpServerConfig(**base)


def test_definitions_names_and_skips() -> None:
    """Case N6."""
    tools = [
        RemoteTool("search", "find", OBJ),
        RemoteTool("dotted.name", "", OBJ),
        RemoteTool("bad name", "x", OBJ),
        RemoteTool("", "x", OBJ),
        RemoteTool("a..b", "x", OBJ),
        RemoteTool("search", "again", OBJ),
        RemoteTool("union", "x", {"type": "object", "properties": {"v": {"oneOf": [{"type": "string"}]}}}),
        RemoteTool("notobj", "x", {"type": "string"}),
    ]
    definitions, skipped = build_definitions(_server(), tools, {})
    assert [d.name for d in definitions] == ["mcp.srv.search", "mcp.srv.dotted.name"]
    assert definitions[1].description == "MCP tool dotted.name of server srv"
    reasons = {s["tool_name"]: s["reason"] for s in skipped}
    assert set(reasons) == {"bad name", "", "a..b", "search", "union", "notobj"}
    assert "duplicate" in reasons["search"] and "oneOf" in reasons["union"]
    other, _ = build_definitions(_server(server_id="other"), tools[:1], {})
    assert other[0].name == "mcp.other.search" != definitions[0].name
    meta = definitions[0].metadata
    assert meta == {
        "source": "mcp",
        "mcp_server_id": "srv",
        "mcp_tool_name": "search",
        "annotations": None,
        "config_hash": "h",
        "concurrency": "serial",
    }


def test_permission_and_tag_derivation() -> None:
    tools = [
        RemoteTool("plain", "", OBJ),
        RemoteTool("ro", "", OBJ, {"readOnlyHint": True}),
        RemoteTool("ro_false", "", OBJ, {"readOnlyHint": False, "openWorldHint": False}),
        RemoteTool("world", "", OBJ, {"readOnlyHint": True, "openWorldHint": True}),
        RemoteTool("destroy", "", OBJ, {"destructiveHint": True}),
    ]
    defs, _ = build_definitions(_server(tags=("network", "custom")), tools, {})
    by = {d.name.rsplit(".", 1)[1]: d for d in defs}
    assert by["plain"].permission == "write" and by["ro_false"].permission == "write"
    assert by["ro"].permission == "readonly" and by["ro"].metadata["concurrency"] == "parallel"
    assert by["plain"].tags == ["mcp", "network", "custom"]
    assert by["world"].tags == ["mcp", "network", "custom"]
    assert "dangerous" in by["destroy"].tags
    defs, _ = build_definitions(_server(), tools, {})
    by = {d.name.rsplit(".", 1)[1]: d for d in defs}
    assert by["plain"].tags == ["mcp"] and by["world"].tags == ["mcp", "network"]
    assert by["ro"].metadata["annotations"] == {"readOnlyHint": True}


def test_overrides_tool_key_wins_over_server_key() -> None:
    tools = [
        RemoteTool("search", "", OBJ),
        RemoteTool("write", "", OBJ),
        RemoteTool("ro", "", OBJ, {"readOnlyHint": True}),
    ]
    overrides = {
        "mcp.srv.*": ToolOverride(tags=["network"]),
        "mcp.srv.search": ToolOverride(permission="readonly", tags=["docs"]),
        "mcp.srv.ro": ToolOverride(tags=["dangerous", "mcp"]),
        "mcp.srv.ghost": ToolOverride(permission="readonly"),
    }
    defs, _ = build_definitions(_server(tags=("fs",)), tools, overrides)
    by = {d.name: d for d in defs}
    assert by["mcp.srv.search"].permission == "readonly" and by["mcp.srv.search"].tags == ["mcp", "docs"]
    assert by["mcp.srv.write"].permission == "write" and by["mcp.srv.write"].tags == ["mcp", "network"]
    assert by["mcp.srv.ro"].permission == "readonly" and by["mcp.srv.ro"].tags == ["mcp", "dangerous"]
    assert by["mcp.srv.ro"].metadata["concurrency"] == "serial"
    assert unmatched_overrides("srv", by, overrides) == ["mcp.srv.ghost"]


async def test_result_mapping(tmp_path: Path) -> None:
    created: list[tuple[bytes, str, str | None]] = []

    async def create(data: bytes, filename: str, mime: str | None, summary: str | None) -> ArtifactRefBlock:
        created.append((data, filename, mime))
        return ArtifactRefBlock(artifact_id=f"artifact_{len(created)}", summary=summary, mime_type=mime)

    call = ToolCall(tool_call_id="c", name="mcp.srv.x", arguments={})
    png = base64.b64encode(b"PNGDATA").decode()
    remote = RemoteResult(
        items=[
            {"type": "text", "text": "hello"},
            {"type": "image", "data": png, "mimeType": "image/png"},
            {"type": "audio", "data": "!!notbase64", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "m://a", "text": "embedded"}},
            {"type": "resource", "resource": {"uri": "m://b", "blob": base64.b64encode(b"BLOB").decode()}},
            {"type": "resource_link", "uri": "m://c", "name": "c"},
        ],
        structured={"answer": 42},
    )
    result = await map_result(remote, call, create)
    assert not result.is_error
    kinds = [type(b).__name__ for b in result.content]
    assert kinds == [
        "TextBlock",
        "ArtifactRefBlock",
        "TextBlock",
        "TextBlock",
        "ArtifactRefBlock",
        "JsonBlock",
        "JsonBlock",
    ]
    image = result.content[1]
    assert (
        isinstance(image, ArtifactRefBlock)
        and image.artifact_id == "artifact_1"
        and image.mime_type == "image/png"
    )
    assert created[0][0] == b"PNGDATA" and created[0][1].endswith(".png")
    assert created[1][0] == b"BLOB" and created[1][2] is None
    assert result.content[-1] == JsonBlock(data={"answer": 42})
    error = await map_result(
        RemoteResult(items=[{"type": "text", "text": "boom"}], is_error=True), call, create
    )
    assert error.is_error and error.error is not None
    assert error.error.code == ErrorCode.internal_error and error.error.type == "mcp_tool_error"
    assert error.error.message == "boom" and error.content == [TextBlock(text="boom")]
    empty = await map_result(RemoteResult(is_error=True), call, create)
    assert empty.content[0] == TextBlock(text="MCP tool mcp.srv.x reported an error")
