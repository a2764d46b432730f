"""What is API and what is implementation (issue 15 item 8; docs/architecture.md#public-surface).

Implementation modules and packages carry a leading ``_`` (httpx style: ``agent_core._loop.driver``,
``agent_core.tools._pipeline``); every other module is public and listed here. A new module is either
named ``_x`` or added to :data:`PUBLIC_MODULES` on purpose.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import agent_core

SRC = Path(agent_core.__file__).resolve().parent

PUBLIC_MODULES = frozenset(
    {
        "agent_core",
        # the contract's types and errors (docs/errors.md names agent_core.types.enums / .protocol)
        *(
            f"agent_core.types.{m}"
            for m in ("base", "content", "enums", "hooks", "mappers", "model", "permissions")
        ),
        *(f"agent_core.types.{m}" for m in ("protocol", "runtime", "storage", "tools", "workers")),
        "agent_core.types.events",  # RuntimeEvent.payload: one typed payload class per event type
        "agent_core.types.inbox",  # runtime.deliver entries (issue 36)
        "agent_core.types.team",  # runtime.team views (issue 36)
        "agent_core.types.mcp",  # runtime.mcp_resources / mcp_prompts views (issue 38)
        "agent_core.errors",
        "agent_core.errors.codes",
        "agent_core.errors.exceptions",
        "agent_core.errors.payloads",
        # extension points: custom tools, providers, permission callbacks (DEFER), configuration
        "agent_core.tools.adapter",
        "agent_core.tools.context",
        "agent_core.tools.preflight",
        "agent_core.tools.registry",
        "agent_core.tools.files",  # the FileAccess hook of the built-in file tools (issue 38)
        "agent_core.providers",
        "agent_core.providers.base",
        "agent_core.providers.registry",
        "agent_core.permissions",
        "agent_core.config",
        "agent_core.config.loaded",
        "agent_core.config.loader",
        "agent_core.config.model",
        "agent_core.config.schema",
        # surfaces and the testing kit (their implementation modules are already _x)
        "agent_core.testing",
        "agent_core.cli",
        "agent_core.cli.__main__",
        "agent_core.server",
        # the editor and agent adapters (issue 38): soong-agent acp / mcp-server, embeddable
        "agent_core.adapters",
        "agent_core.adapters.acp",
        "agent_core.adapters.mcp_server",
        # chat channels (issue 38): the Channel protocol, the hub and the platform adapters
        "agent_core.adapters.channels",
        "agent_core.adapters.channels.slack",
        "agent_core.adapters.channels.telegram",
        "agent_core.telemetry",
        "agent_core.redaction",  # register_secret / redact_text for code that prints or logs
        "agent_core.elicitation",  # MCP elicitation forms answered as typed text (chat, channels)
        "agent_core.store",  # AgentRuntime.store: the session store protocol and serve's approvals table
        "agent_core.jobs",
        "agent_core.schedules",
        "agent_core.engine",
        "agent_core.engine.temporal",
        # docs/scale-out.md: embed a worker with run_worker(runtime, stop)
        "agent_core.engine.temporal.worker",
    }
)


def _module_names() -> set[str]:
    names = set()
    for path in SRC.rglob("*.py"):
        parts = ["agent_core", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
    return names


def _private(name: str) -> bool:
    return any(part.startswith("_") and part != "__main__" for part in name.split(".")[1:])


def test_every_module_is_private_or_listed_public() -> None:
    modules = _module_names()
    unmarked = sorted(m for m in modules if not _private(m) and m not in PUBLIC_MODULES)
    assert unmarked == [], f"name these _x or list them in PUBLIC_MODULES: {unmarked}"
    assert modules >= PUBLIC_MODULES, f"listed but missing: {sorted(PUBLIC_MODULES - modules)}"


@pytest.mark.parametrize(
    "module",
    sorted(PUBLIC_MODULES - {"agent_core.cli.__main__"}),
)
def test_public_modules_export_only_names_they_define_or_re_export(module: str) -> None:
    mod = importlib.import_module(module)
    for name in getattr(mod, "__all__", ()):
        assert hasattr(mod, name), f"{module}.__all__ names {name!r}, which it does not have"


def test_export_map_is_the_type_checking_block() -> None:
    """``agent_core._EXPORTS`` (what the run time imports) names exactly the re-exports type checkers see."""
    import ast

    tree = ast.parse((SRC / "__init__.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    assert all(node.__class__ is ast.ImportFrom for node in block.body)
    imports = [
        (alias, str(node.module))
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]
    assert all(alias.asname == alias.name for alias, _ in imports)  # every one an explicit `X as X` re-export
    assert dict((alias.name, module) for alias, module in imports) == agent_core._EXPORTS
    assert len(imports) == len(agent_core._EXPORTS)
    assert agent_core.__all__ == sorted(agent_core._EXPORTS)
    for name, module in agent_core._EXPORTS.items():
        assert getattr(agent_core, name) is getattr(importlib.import_module(module), name)


def test_runtime_types_re_export_the_api_results() -> None:
    """The maintenance/inspection API results live in ``types._results`` (off a run's import path) and stay
    importable from ``agent_core.types.runtime``, their public home."""
    from agent_core.types import _results, runtime

    assert {
        name
        for name, value in vars(_results).items()
        if isinstance(value, type) and value.__module__ == _results.__name__
    } == runtime._RESULTS
    for name in sorted(runtime._RESULTS):
        assert getattr(runtime, name) is getattr(_results, name)
    from agent_core.types.runtime import CleanupResult

    assert CleanupResult is _results.CleanupResult
    with pytest.raises(AttributeError):
        runtime.NoSuchResult  # noqa: B018
