"""A library leaves its host alone (issue 35): importing ``agent_core``, opening a runtime and running a
turn change no process-wide state, and ``src/`` reaches no private attribute of a dependency.

The first test runs a host in a subprocess: it imports its own HTTP stack (httpx, httpcore, anyio,
sniffio), records the process's shared state, then imports ``agent_core``, opens a runtime and runs a
turn with a tool call against a scripted model server, and compares. The second reads ``src/`` with
``scripts/architecture_report.py`` (the figures the issue asks for), whose scanner the third test checks on
a tree of known offences.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agent_core.testing import OpenAIWire, ScriptedOpenAIServer, ScriptedRequest, stream
from agent_core.testing._servers import Response
from tests.fixtures.architecture import architecture_report

HOST = r"""
import asyncio, gc, json, logging, os, signal, sys, threading, warnings

import anyio, h11, httpcore, httpx, sniffio  # the host's own HTTP stack, imported before agent_core

WATCHED = ("httpcore", "httpx", "anyio", "h11", "sniffio")


def module_globals():
    return {
        name: {key: id(value) for key, value in vars(module).items()}
        for name, module in list(sys.modules.items())
        if module is not None and name.split(".")[0] in WATCHED
    }


def shared_state():
    return {
        "gc": [gc.isenabled(), list(gc.get_threshold()), gc.get_freeze_count(), gc.get_debug(), len(gc.callbacks)],
        "environ": dict(os.environ),
        "signals": {
            str(number): repr(signal.getsignal(number))
            for number in sorted(signal.valid_signals())
            if number not in (signal.SIGKILL, signal.SIGSTOP)
        },
        "interpreter": [
            repr(sys.meta_path), repr(sys.path_hooks), list(sys.path), repr(sys.excepthook),
            repr(threading.excepthook), sys.getrecursionlimit(), sys.getswitchinterval(),
            repr(sys.gettrace()), repr(sys.getprofile()), repr(asyncio.get_event_loop_policy()),
            repr(sys.get_asyncgen_hooks()), sys.get_int_max_str_digits(),
        ],
        "logging": [logging.root.level, repr(logging.root.handlers), logging.root.manager.disable],
        "warnings": repr(warnings.filters),
    }


gc_calls = []
for changer in ("disable", "enable", "freeze", "unfreeze", "set_threshold", "set_debug"):
    # a change made and undone (freeze then unfreeze) leaves no trace in the state: calls are recorded
    setattr(gc, changer, lambda *args, _call=getattr(gc, changer), _name=changer: (gc_calls.append(_name), _call(*args))[1])

modules_before = dict(sys.modules)
globals_before = module_globals()
state_before = shared_state()

import agent_core  # noqa: E402
from agent_core import AgentRuntime  # noqa: E402


async def turn():
    async with AgentRuntime(project_dir=sys.argv[1]) as runtime:
        run = await runtime.start("read notes.txt")
        async for _ in run.events():
            pass
        return run.status.value


status = asyncio.run(turn())

changed_modules = sorted(
    name for name, module in modules_before.items() if sys.modules.get(name) is not module
)
added_not_modules = sorted(
    name for name, module in sys.modules.items()
    if name not in modules_before and not isinstance(module, type(sys))
)
globals_after = module_globals()
# replaced or removed; added names are the libraries' own (anyio binds its names lazily, an imported
# submodule becomes an attribute of its package)
changed_globals = sorted(
    f"{name}.{key}"
    for name, values in globals_before.items()
    for key, ident in values.items()
    if globals_after.get(name, {}).get(key) != ident
)
state_after = shared_state()
print(json.dumps({
    "status": status,
    "gc_calls": gc_calls,
    "changed_modules": changed_modules,
    "added_not_modules": added_not_modules,
    "changed_globals": changed_globals,
    "changed_state": {k: [state_before[k], state_after[k]] for k in state_before if state_before[k] != state_after[k]},
}))
"""


def _answer(request: ScriptedRequest) -> Response:
    body = request.json
    last = body["messages"][-1]
    if last["role"] == "tool":
        return stream(OpenAIWire.text_stream("the notes say hello"))
    name = next(t["function"]["name"] for t in body["tools"] if "read_file" in t["function"]["name"])
    return stream(OpenAIWire.tool_stream([("call_1", name, {"path": "notes.txt"})]))


def run_host(tmp_path: Path, pythonpath: str | None = None) -> dict[str, Any]:
    """Runs :data:`HOST` against a scripted model; its JSON report (with ``model_requests``)."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (project / "notes.txt").write_text("hello\n", encoding="utf-8")
    with ScriptedOpenAIServer(strict=False) as server:
        server.handler(_answer)
        (home / "config.toml").write_text(
            textwrap.dedent(
                f"""\
                [model]
                provider = "openai"
                base_url = "{server.base_url}"
                api_key_env = "SOONG_HOST_STATE_KEY"
                name = "m"
                context_window = 100000
                [model.retry]
                max_attempts = 1
                [compact]
                enabled = false
                [memory]
                enabled = false
                """
            ),
            encoding="utf-8",
        )
        env = {
            **{k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
            "HOME": str(tmp_path),
            "SOONG_AGENT_HOME": str(home),
            "SOONG_HOST_STATE_KEY": "sk-host-state-test",
        }
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        done = subprocess.run(
            [sys.executable, "-c", HOST, str(project)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        requests = len(server.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    report["model_requests"] = requests
    return report


def test_import_open_and_a_turn_leave_the_process_state_as_found(tmp_path: Path) -> None:
    report = run_host(tmp_path)
    assert (report["status"], report["model_requests"]) == ("completed", 2)  # a tool call, then the answer
    assert report["changed_modules"] == []  # sys.modules: only new modules were added
    assert report["added_not_modules"] == []  # ... and no None (negative) entries
    assert report["changed_globals"] == []  # no global of httpcore, httpx, anyio, h11, sniffio replaced
    assert report["gc_calls"] == []  # the collector is the host's: not paused, frozen or tuned
    assert report["changed_state"] == {}  # gc, os.environ, signals, interpreter hooks, logging, warnings


@pytest.fixture(scope="module")
def arch() -> ModuleType:
    return architecture_report()


def test_src_patches_nothing_process_wide_and_reaches_no_private_attribute_of_a_dependency(
    arch: ModuleType,
) -> None:
    found = arch.host_state()
    assert found["patches"] == []
    assert found["privates"] == []


OFFENCES = {
    "cli/__init__.py": """
        import signal, sys
        sys.modules.setdefault("httpx._main", None)  # patch: nobody's, not even the CLI's
        signal.signal(signal.SIGINT, print)  # fine: the CLI owns its process
    """,
    "a.py": """
        import gc, os, sys
        import httpcore
        import httpcore._synchronization
        from httpx._utils import get_environment_proxies
        gc.freeze()
        gc.disable()
        sys.modules["sniffio"] = None
        del sys.modules["x"]
        os.environ["A"] = "1"
        os.environ.update(B="2")
        httpcore._synchronization.anyio = object()
        secrets = os.environ._data
        raw = getattr(os.environ, "_data", None)
    """,
    "b.py": """
        import asyncio, signal, sys
        def install():
            module = sys.modules.get("httpcore._synchronization")
            setattr(module, "anyio", None)
        def swap(client, pool, step, conn):
            pool = getattr(client._transport, "_pool", None)
            pool._network_backend = None
            object.__setattr__(step, "__pydantic_fields_set__", set())
            raw = conn._conn
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, print)
    """,
    "fine.py": """
        import os
        class Own:
            def __init__(self):
                self._conn = None
                self._pool = getattr(self, "_pool", None)
            def close(self):
                os._exit(0)
    """,
}


def test_the_scanner_finds_each_kind_of_offence(arch: ModuleType, tmp_path: Path) -> None:
    package = tmp_path / "agent_core"
    for rel, code in OFFENCES.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code), encoding="utf-8")
    found = arch.host_state(tmp_path)
    patches = [line.split(": ", 1) for line in found["patches"]]
    privates = [line.split(": ", 1) for line in found["privates"]]
    assert not any(where.startswith("agent_core/fine.py") for where, _ in patches + privates)
    assert [what for where, what in patches if where.startswith("agent_core/cli/")] == [
        "sys.modules.setdefault()"
    ]
    assert sorted(what for where, what in patches if where.startswith("agent_core/a.py")) == sorted(
        [
            "gc.freeze()",
            "gc.disable()",
            "sys.modules[...] written",
            "sys.modules[...] written",
            "os.environ[...] written",
            "os.environ.update()",
            "httpcore._synchronization.anyio assigned (another package's module)",
        ]
    )
    assert sorted(what for where, what in patches if where.startswith("agent_core/b.py")) == sorted(
        ["setattr(module, ...) (another package's module)", "add_signal_handler()"]
    )
    assert sorted(what for where, what in privates if where.startswith("agent_core/a.py")) == sorted(
        [
            "import httpcore._synchronization",
            "from httpx._utils import ...",
            "httpcore._synchronization",
            "os.environ._data",
            "getattr(..., '_data')",
        ]
    )
    assert sorted(what for where, what in privates if where.startswith("agent_core/b.py")) == sorted(
        [
            "getattr(..., '_pool')",
            "._transport",
            "._network_backend written",
            "'__pydantic_fields_set__'",
            "._conn",
        ]
    )
