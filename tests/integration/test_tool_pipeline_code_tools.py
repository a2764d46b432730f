"""The real built-in code tools through the pipeline: permission matrix, scopes, outside roots, abort.

Covers the pipeline half of area H and docs/tools.md with ``CodeToolsAdapter`` on real
files and real processes (no runtime loop).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import ErrorCode
from agent_core.tools._builtin import CODE_TOOL_NAMES, CodeToolsAdapter
from agent_core.tools._pipeline import DEFAULT_CANCEL_GRACE_S
from agent_core.tools.context import RunScope
from agent_core.tools.registry import ToolRegistry
from agent_core.types.content import ArtifactRefBlock, JsonBlock
from agent_core.types.enums import EventType
from agent_core.types.permissions import PermissionDecision
from tests.conftest import REAL_HOME
from tests.fixtures.tool_pipeline import PermissionRecorder, make_executor, make_settings, tool_call
from tests.fixtures.tool_sink import RecordingSink, make_scope


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = (tmp_path / "project").resolve()
    p.mkdir()
    (p / "a.txt").write_text("alpha\nneedle\n")
    (p / ".env").write_text("SECRET=1\n")
    (p / ".env.local").write_text("SECRET=2\n")
    (p / "k.pem").write_text("pem needle\n")
    (p / "k.key").write_text("key needle\n")
    return p


@pytest.fixture
def sink(tmp_path: Path) -> RecordingSink:
    return RecordingSink(tmp_path / "artifacts")


def setup(project: Path, callback: Any = None, grace: float = DEFAULT_CANCEL_GRACE_S, **settings: Any) -> Any:
    cfg = make_settings(**settings)
    reg = ToolRegistry()
    reg.register_adapter(CodeToolsAdapter(cfg), internal=True)
    executor, gate = make_executor(reg, cfg, callback=callback, cancel_grace_s=grace)
    return executor, gate


def scope_of(project: Path) -> RunScope:
    return make_scope(project, project.parent / "home", effective_tools=frozenset(CODE_TOOL_NAMES))


async def run1(executor: Any, scope: RunScope, sink: RecordingSink, name: str, **args: Any) -> Any:
    [result] = (await executor.execute_turn([tool_call(name, **args)], scope, sink)).results
    return result


def code(result: Any) -> str | None:
    return result.error.code.value if result.error else None


async def test_read_without_callback(project: Path, sink: RecordingSink) -> None:
    """Case H1."""
    for callback in (None, PermissionRecorder.never()):
        executor, _ = setup(project, callback)
        result = await run1(executor, scope_of(project), sink, "code.read_file", path="a.txt")
        assert code(result) is None and result.content[0].data["content"] == "alpha\nneedle"


def _home_targets(home: Path) -> list[str]:
    """Creates the sensitive files under the session's fake HOME (never the real one)."""
    assert home.resolve() != REAL_HOME and Path(os.path.expanduser("~")).resolve() == home.resolve()
    for rel in (".ssh/id_rsa", ".gnupg/x", ".aws/credentials", ".config/gcloud/x"):
        target = home / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("needle\n")
    return ["~/.ssh/id_rsa", "~/.gnupg/x", "~/.aws/credentials", "~/.config/gcloud/x"]


@pytest.mark.parametrize(
    "target",
    [
        "~/.ssh/id_rsa",
        "~/.gnupg/x",
        "~/.aws/credentials",
        "~/.config/gcloud/x",
        "k.pem",
        "k.key",
        ".env",
        ".env.local",
    ],
)
@pytest.mark.parametrize("tool", ["code.read_file", "code.search"])
async def test_sensitive_targets_ask(
    project: Path, sink: RecordingSink, session_home: Path, target: str, tool: str
) -> None:
    """Cases H2, H14."""
    _home_targets(session_home)
    args = {"path": target} if tool == "code.read_file" else {"query": "needle", "path": target}
    recorder = PermissionRecorder([PermissionDecision(decision="deny")])
    executor, _ = setup(project, recorder)
    denied = await run1(executor, scope_of(project), sink, tool, **args)
    assert code(denied) == "permission_denied"
    [request] = recorder.requests
    assert request.suggested_decision == "deny" and "sensitive_path" in request.metadata["reasons"]
    no_callback, _ = setup(project)
    assert code(await run1(no_callback, scope_of(project), sink, tool, **args)) == "permission_denied"


@pytest.mark.parametrize("target", ["~/.ssh", "~/.gnupg", "~/.aws", "~/.config/gcloud"])
async def test_sensitive_directories_list_dir(
    project: Path, sink: RecordingSink, session_home: Path, target: str
) -> None:
    """Case H14."""
    _home_targets(session_home)
    recorder = PermissionRecorder(["allow_once"])
    executor, _ = setup(project, recorder)
    result = await run1(executor, scope_of(project), sink, "code.list_dir", path=target)
    assert code(result) is None and len(recorder.requests) == 1
    no_callback, _ = setup(project)
    assert (
        code(await run1(no_callback, scope_of(project), sink, "code.list_dir", path=target))
        == "permission_denied"
    )


async def test_write_permissions(project: Path, sink: RecordingSink) -> None:
    """Cases H3, H4."""
    recorder = PermissionRecorder(["allow_once", "allow_once", "allow_for_session", "allow_once"])
    executor, _ = setup(project, recorder)
    scope = scope_of(project)
    assert code(await run1(executor, scope, sink, "code.write_file", path="f.txt", content="1")) is None
    assert (
        code(await run1(executor, scope, sink, "code.write_file", path="f.txt", content="2", overwrite=True))
        is None
    )
    assert len(recorder.requests) == 2  # allow_once asks again for the same scope
    assert code(await run1(executor, scope, sink, "code.write_file", path="g.txt", content="1")) is None
    assert (
        code(await run1(executor, scope, sink, "code.write_file", path="g.txt", content="2", overwrite=True))
        is None
    )
    assert len(recorder.requests) == 3  # allow_for_session covers g.txt
    assert (
        code(
            await run1(
                executor, scope, sink, "code.edit_file", path="g.txt", edits=[{"old": "2", "new": "3"}]
            )
        )
        is None
    )
    assert len(recorder.requests) == 4  # another tool on the same target asks (H11)
    assert (project / "g.txt").read_text() == "3"
    assert [r.target_scope for r in recorder.requests] == [
        str(project / n) for n in ("f.txt", "f.txt", "g.txt", "g.txt")
    ]


async def test_no_callback_no_side_effects(project: Path, sink: RecordingSink) -> None:
    """Case H6."""
    executor, _ = setup(project)
    scope = scope_of(project)
    marker = project / "marker.txt"
    results = [
        await run1(executor, scope, sink, "code.write_file", path="new.txt", content="x"),
        await run1(
            executor, scope, sink, "code.edit_file", path="a.txt", edits=[{"old": "alpha", "new": "beta"}]
        ),
        await run1(
            executor,
            scope,
            sink,
            "code.run_command",
            argv=[sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        ),
    ]
    assert [code(r) for r in results] == ["permission_denied"] * 3
    assert not (project / "new.txt").exists() and not marker.exists()
    assert (project / "a.txt").read_text() == "alpha\nneedle\n"


async def test_path_conflict_never_asks(project: Path, sink: RecordingSink) -> None:
    executor, _ = setup(project, PermissionRecorder.never())
    result = await run1(executor, scope_of(project), sink, "code.write_file", path="a.txt", content="new")
    assert code(result) == "path_conflict" and (project / "a.txt").read_text() == "alpha\nneedle\n"


async def test_run_command_scope_and_request(
    project: Path, sink: RecordingSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case H12."""
    monkeypatch.delenv("TMPDIR", raising=False)
    (project / "sub").mkdir()
    recorder = PermissionRecorder(["allow_for_session", "allow_once", "allow_once", "allow_once"])
    executor, _ = setup(project, recorder)
    scope = scope_of(project)
    python = [sys.executable, "-c", "print(1)"]
    long_arg = "x" * 2000
    assert code(await run1(executor, scope, sink, "code.run_command", argv=[*python, long_arg])) is None
    # the session grant covers the argv it was shown (python -c ... x*2000), not other inline code
    assert code(await run1(executor, scope, sink, "code.run_command", argv=[*python, long_arg])) is None
    assert code(await run1(executor, scope, sink, "code.run_command", argv=python)) is None  # asks again
    assert code(await run1(executor, scope, sink, "code.run_command", argv=["true"])) is None
    assert code(await run1(executor, scope, sink, "code.run_command", argv=python, cwd="sub")) is None
    first, same_exe, other_exe, other_cwd = recorder.requests
    assert same_exe.target_scope == first.target_scope
    assert first.request_id.startswith("perm_") and first.dangerous and "dangerous" in first.tags
    exe, _, cwd = first.target_scope.partition(" @ ") if first.target_scope else ("", "", "")
    assert Path(exe).resolve() == Path(sys.executable).resolve() and cwd == str(project)
    assert other_exe.target_scope and other_exe.target_scope.endswith(f" @ {project}")
    assert other_cwd.target_scope and other_cwd.target_scope.endswith(f" @ {project / 'sub'}")
    assert first.env_summary == {"PATH": "<set>", "HOME": "<set>", "TMPDIR": "<unset>"}
    assert len(first.args_summary) <= 500 and first.cwd == str(project)


async def test_outside_roots_with_symlink(tmp_path: Path, project: Path, sink: RecordingSink) -> None:
    """Case G21."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "escape").symlink_to(outside)
    refuse, _ = setup(project)
    result = await run1(refuse, scope_of(project), sink, "code.write_file", path="escape/x.txt", content="x")
    assert code(result) == "write_outside_allowed_roots" and not (outside / "x.txt").exists()
    recorder = PermissionRecorder([PermissionDecision(decision="deny"), "allow_once"])
    ask, _ = setup(project, recorder)
    assert (
        code(await run1(ask, scope_of(project), sink, "code.write_file", path="escape/x.txt", content="x"))
        == "permission_denied"
    )
    assert (
        code(await run1(ask, scope_of(project), sink, "code.write_file", path="escape/x.txt", content="x"))
        is None
    )
    assert (outside / "x.txt").read_text() == "x"
    assert [r.suggested_decision for r in recorder.requests] == ["deny", "deny"]
    assert all("outside_write_roots" in r.metadata["reasons"] for r in recorder.requests)


async def test_search_outside_project(tmp_path: Path, project: Path, sink: RecordingSink) -> None:
    """Case G25."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "n.txt").write_text("needle\n")
    no_callback, _ = setup(project)
    assert (
        code(
            await run1(
                no_callback, scope_of(project), sink, "code.search", query="needle", path=str(elsewhere)
            )
        )
        == "permission_denied"
    )
    recorder = PermissionRecorder(["allow_once"])
    executor, _ = setup(project, recorder)
    result = await run1(executor, scope_of(project), sink, "code.search", query="needle", path=str(elsewhere))
    assert code(result) is None and result.content[0].data["matches"][0]["path"] == str(elsewhere / "n.txt")
    assert (
        recorder.requests[0].target_scope == str(elsewhere)
        and recorder.requests[0].suggested_decision == "allow_once"
    )


async def test_read_file_never_artifactised_but_search_is(project: Path, sink: RecordingSink) -> None:
    (project / "big.txt").write_text("needle " + "y" * 3000 + "\n" * 1)
    lines = "\n".join(f"needle {i} " + "z" * 100 for i in range(300))
    (project / "many.txt").write_text(lines)
    executor, _ = setup(project, tools={"result_limit_bytes": 2048})
    scope = scope_of(project)
    read = await run1(executor, scope, sink, "code.read_file", path="many.txt", max_lines=300)
    assert isinstance(read.content[0], JsonBlock) and read.content[0].data is not None
    search = await run1(executor, scope, sink, "code.search", query="needle", path="many.txt", limit=300)
    [block] = search.content
    assert isinstance(block, JsonBlock) and block.data is None and block.artifact_id in sink.artifacts
    assert not any(isinstance(b, ArtifactRefBlock) for b in read.content)


async def test_cancel_during_run_command(project: Path, sink: RecordingSink) -> None:
    pid_file = project / "pid.txt"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); print('started', flush=True); time.sleep(30)"
    executor, _ = setup(project, PermissionRecorder.always("allow_once"))
    scope = scope_of(project)
    calls = [
        tool_call("code.run_command", "c1", argv=[sys.executable, "-c", script]),
        tool_call("code.read_file", "c2", path="a.txt"),
    ]
    task = asyncio.create_task(executor.execute_turn(calls, scope, sink))
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.02)
    pid = int(pid_file.read_text())
    scope.cancel_event.set()
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.aborted and outcome.aborted_call_ids == ["c1", "c2"]
    aborted, skipped = outcome.results
    assert code(aborted) == "cancelled" and aborted.metadata["aborted"] is True
    assert aborted.metadata["partial"] is True  # the runner returned the output it had
    assert skipped.metadata["skipped"] is True and skipped.metadata["partial"] is False
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(pid, 0)
            await asyncio.sleep(0.02)
    failed = [p for _, t, p in sink.committed if t == EventType.tool_failed]
    assert [p["aborted"] for p in failed] == [True, True]


async def test_readonly_confirm_and_unknown_args(project: Path, sink: RecordingSink) -> None:
    recorder = PermissionRecorder(["allow_once"])
    executor, _ = setup(project, recorder, permissions={"readonly_default": "confirm"})
    assert code(await run1(executor, scope_of(project), sink, "code.read_file", path="a.txt")) is None
    assert recorder.requests[0].metadata["reasons"] == ["readonly_confirm"]
    result = await run1(executor, scope_of(project), sink, "code.run_command", argv=["true"], env={"A": "1"})
    assert code(result) == "validation_error"
    assert ErrorCode.validation_error.value == result.error.code.value
