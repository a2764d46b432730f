"""``code.run_command`` (docs/tools.md#coderun_command) at the adapter level."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from agent_core._redaction import REDACTED
from tests.fixtures.code_tools import CodeToolsHarness, data_of, error_code, make_harness

RUN = "code.run_command"
PY = sys.executable
SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def h(tmp_path: Path) -> CodeToolsHarness:
    return make_harness(tmp_path, default_timeout_ms=20_000)


async def test_argv_runs_without_shell(h: CodeToolsHarness) -> None:
    """Case G14."""
    data = await h.ok(RUN, argv=[PY, "-c", "print(1)"])
    assert data == {
        "exit_code": 0,
        "stdout": "1\n",
        "stderr": "",
        "stdout_artifact_id": None,
        "stderr_artifact_id": None,
        "truncated": False,
    }
    literal = await h.ok(RUN, argv=[PY, "-c", "import sys; print(sys.argv[1])", "$HOME;*"])
    assert literal["stdout"] == "$HOME;*\n"


async def test_shell_string_rejected_nothing_spawned(h: CodeToolsHarness) -> None:
    """Case G15."""
    marker = h.project / "marker"
    for argv in (f"touch {marker}", [], [""], [PY, 3], [PY, "a\x00b"]):
        assert await h.error(RUN, argv=argv) == "validation_error", argv
        assert (await h.preflight_error(RUN, argv=argv)).code == "validation_error"
    assert await h.error(RUN) == "validation_error"
    assert not marker.exists()


async def test_cwd_boundary(h: CodeToolsHarness, tmp_path: Path) -> None:
    """Case G16."""
    marker = tmp_path / "outside" / "ran"
    marker.parent.mkdir()
    argv = [PY, "-c", "open('ran', 'w')"]
    err = await h.preflight_error(RUN, argv=argv, cwd=str(marker.parent))
    assert err.code == "write_outside_allowed_roots"
    assert await h.error(RUN, argv=argv, cwd=str(marker.parent)) == "write_outside_allowed_roots"
    assert await h.error(RUN, argv=argv, cwd="..") == "write_outside_allowed_roots"
    assert not marker.exists()
    root = (tmp_path / "root").resolve()
    root.mkdir()
    allowed = make_harness(tmp_path / "h2", allowed_write_roots=[str(root)])
    assert (await allowed.ok(RUN, argv=argv, cwd=str(root)))["exit_code"] == 0
    assert (root / "ran").exists()
    (h.project / "sub").mkdir()
    assert (await h.ok(RUN, argv=[PY, "-c", "import os; print(os.getcwd())"], cwd="sub"))["stdout"] == (
        f"{h.project / 'sub'}\n"
    )
    assert await h.error(RUN, argv=argv, cwd="missing") == "file_not_found"
    (h.project / "f").write_text("x")
    assert await h.error(RUN, argv=argv, cwd="f") == "validation_error"


async def test_timeout_kills_and_reports_partial(h: CodeToolsHarness, tmp_path: Path) -> None:
    """Case G17."""
    pidfile = tmp_path / "pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); print('begun', flush=True); time.sleep(10)"
    started = time.monotonic()
    result = await h.run(RUN, argv=[PY, "-c", code], timeout_ms=300)
    assert time.monotonic() - started < 3
    assert result.is_error and error_code(result) == "timeout"
    data = data_of(result)
    assert data["exit_code"] is None and data["stdout"] == "begun\n"
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        await asyncio.sleep(0.02)
    assert (
        not Path(f"/proc/{pid}").exists()
        or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]
    )


async def test_default_cwd_and_env_allowlist(h: CodeToolsHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case G22."""
    monkeypatch.setenv("SOONG_TEST_API_KEY", SECRET)
    monkeypatch.setenv("HARMLESS_VAR", "x")
    code = "import os, json; print(os.getcwd()); print(json.dumps(dict(os.environ)))"
    data = await h.ok(RUN, argv=[PY, "-c", code])
    cwd, env_json = data["stdout"].split("\n", 1)
    assert cwd == str(h.project)
    assert "SOONG_TEST_API_KEY" not in env_json and SECRET not in env_json and "HARMLESS_VAR" not in env_json
    assert '"PATH"' in env_json
    assert await h.error(RUN, argv=[PY, "-c", "pass"], env={"X": "1"}) == "validation_error"
    pre = await h.preflight(RUN, argv=[PY, "-c", "pass"])
    assert pre.env_summary == {
        "PATH": "<set>",
        "HOME": "<set>",
        "TMPDIR": "<set>" if "TMPDIR" in os.environ else "<unset>",
    }
    assert SECRET not in repr(pre)


async def test_env_allowlist_from_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXTRA_ALLOWED", "yes")
    h = make_harness(tmp_path, env_allowlist=["PATH", "EXTRA_ALLOWED"])
    data = await h.ok(
        RUN, argv=[PY, "-c", "import os; print(sorted(k for k in os.environ if k != 'LC_CTYPE'))"]
    )
    assert data["stdout"] == "['EXTRA_ALLOWED', 'PATH']\n"


async def test_limits_exit_codes_and_stderr_truncation(tmp_path: Path) -> None:
    """Case G23."""
    h = make_harness(tmp_path, stderr_limit_bytes=100, max_timeout_ms=600_000)
    assert await h.error(RUN, argv=[PY, "-c", "pass"], timeout_ms=600_001) == "validation_error"
    assert await h.error(RUN, argv=[PY, "-c", "pass"], timeout_ms=0) == "validation_error"
    code = "import sys; print('out'); sys.stderr.write('x' * 500 + 'boom'); sys.exit(3)"
    result = await h.run(RUN, argv=[PY, "-c", code])
    assert result.is_error and result.error is not None
    assert result.error.code == "internal_error" and result.error.type == "internal_error"
    assert result.error.details["exit_code"] == 3
    assert result.error.message.startswith("command exited with status 3:") and "boom" in result.error.message
    data = data_of(result)
    assert data["exit_code"] == 3 and data["stdout"] == "out\n" and data["truncated"] is True
    assert data["stderr"] == "x" * 50 + "... [truncated 404 bytes] ..." + "x" * 46 + "boom"
    artifact = h.sink.artifacts[data["stderr_artifact_id"]]
    assert artifact.read_text() == "x" * 500 + "boom" and data["stdout_artifact_id"] is None


async def test_stdout_over_limit_artifact_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", SECRET)
    h = make_harness(tmp_path, stdout_limit_bytes=1000)
    code = "import sys; print(sys.argv[1]); print('y' * 5000); print('tail', sys.argv[1])"
    data = await h.ok(RUN, argv=[PY, "-c", code, SECRET])
    assert data["truncated"] is True and data["stdout_artifact_id"] is not None
    assert SECRET not in data["stdout"] and data["stdout"].startswith(REDACTED)
    assert "... [truncated " in data["stdout"] and data["stdout"].endswith(f"tail {REDACTED}\n")
    body = h.sink.artifacts[data["stdout_artifact_id"]].read_text()
    assert SECRET not in body and body.count(REDACTED) == 2 and "y" * 5000 in body


async def test_unknown_executable_and_relative_executable(h: CodeToolsHarness) -> None:
    err = await h.preflight_error(RUN, argv=["definitely-not-a-command-xyz"])
    assert err.code == "file_not_found" and err.details["executable"] == "definitely-not-a-command-xyz"
    assert await h.error(RUN, argv=["definitely-not-a-command-xyz"]) == "file_not_found"
    script = h.project / "tool.sh"
    script.write_text("#!/bin/sh\necho from-script\n")
    script.chmod(0o755)
    assert (await h.ok(RUN, argv=["./tool.sh"]))["stdout"] == "from-script\n"


async def test_run_command_scope_is_executable_at_cwd(h: CodeToolsHarness) -> None:
    """Case H12."""
    (h.project / "other").mkdir()
    python = await h.preflight(RUN, argv=[PY, "-c", "pass"])
    python2 = await h.preflight(RUN, argv=[PY, "-V"])
    elsewhere = await h.preflight(RUN, argv=[PY, "-V"], cwd="other")
    assert python.target_scope == f"{PY} @ {h.project}" == python2.target_scope
    assert elsewhere.target_scope == f"{PY} @ {h.project / 'other'}"
    assert python.cwd == h.project and python.target_paths == [h.project]
    sh = shutil.which("sh", path=os.environ.get("PATH"))
    assert sh is not None
    other_exe = await h.preflight(RUN, argv=["sh", "-c", "true"])
    assert other_exe.target_scope == f"{sh} @ {h.project}" != python.target_scope


async def test_cancel_event_aborts_command_with_partial_output(h: CodeToolsHarness) -> None:
    code = "import time; print('partial', flush=True); time.sleep(10)"
    task = asyncio.create_task(h.run(RUN, argv=[PY, "-c", code]))
    await asyncio.sleep(0.5)
    h.scope.cancel_event.set()
    result = await asyncio.wait_for(task, 4)
    assert result.is_error and error_code(result) == "cancelled"
    assert result.metadata["aborted"] is True and result.metadata["partial"] is True
    assert result.metadata["abort_reason"] == "run_cancelled"
    assert data_of(result)["stdout"] == "partial\n" and data_of(result)["exit_code"] is None


async def test_definition_limits_follow_config(tmp_path: Path) -> None:
    h = make_harness(tmp_path, max_timeout_ms=5000, default_timeout_ms=1000)
    definition = next(d for d in h.adapter.definitions() if d.name == RUN)
    assert definition.input_schema["properties"]["timeout_ms"]["maximum"] == 5000
    assert await h.error(RUN, argv=[PY, "-c", "pass"], timeout_ms=5001) == "validation_error"
    result = await h.run(RUN, argv=[PY, "-c", "import time; time.sleep(5)"])
    assert error_code(result) == "timeout"
