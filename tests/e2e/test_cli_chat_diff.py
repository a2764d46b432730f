"""The change preview of write/edit permission prompts (docs/cli.md#permission-prompts): computed from the
tool's pre-flight, put on ``PermissionRequest.metadata['diff']`` by the gate, shown by ``run`` (and ``chat``):
a new file as its first lines, long diffs cut with a count, escaped, coloured only on a terminal.
"""

from __future__ import annotations

from pathlib import Path

from agent_core.cli._diff import MAX_DIFF_LINES, NEW_FILE_LINES, render_diff
from agent_core.cli._prompt import describe_request
from agent_core.tools._builtin.preview import DIFF_MAX_LINES, edit_preview, write_preview
from agent_core.types.enums import PermissionDecisionKind
from agent_core.types.permissions import PermissionRequest
from tests.fixtures.cli import TurnScript, run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer


def request(metadata: dict[str, object]) -> PermissionRequest:
    return PermissionRequest(
        request_id="perm_1",
        session_id="sess_1",
        agent_id="agent_1",
        run_id="run_1",
        agent_role="main",
        tool_name="code.write_file",
        permission="write",
        tags=["code", "write"],
        args_summary="{}",
        cwd="/p",
        env_summary={},
        dangerous=False,
        suggested_decision=PermissionDecisionKind.allow_once,
        metadata=metadata,
    )


def test_previews_follow_the_tool_semantics(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    created = write_preview(target, "one\ntwo\n")
    assert created is not None and created.created and "--- /dev/null" in created.diff
    assert "+one\n+two\n" in created.diff
    target.write_text("one\ntwo\n")
    changed = write_preview(target, "one\nTWO\n")
    assert changed is not None and not changed.created
    assert "-two\n+TWO\n" in changed.diff and f"--- {target}" in changed.diff
    edited = edit_preview(target, lambda text: text.replace("one", "uno"), create=False)
    assert edited is not None and "-one\n+uno\n" in edited.diff
    assert edit_preview(tmp_path / "missing.txt", lambda t: t + "x", create=False) is None
    (tmp_path / "bin").write_bytes(b"\0\1\2")
    assert write_preview(tmp_path / "bin", "text") is None
    big = write_preview(tmp_path / "big.txt", "".join(f"{i}\n" for i in range(DIFF_MAX_LINES + 50)))
    assert big is not None and big.omitted_lines > 0 and len(big.diff.splitlines()) == DIFF_MAX_LINES


def test_render_cuts_escapes_and_colours(tmp_path: Path) -> None:
    target = tmp_path / "n.txt"
    new = write_preview(target, "".join(f"line {i}\n" for i in range(NEW_FILE_LINES + 5)) + "evil \x1b[2J\n")
    assert new is not None
    meta = {"diff": new.diff, "diff_created": True, "diff_omitted_lines": 0}
    lines = render_diff(request(meta))
    assert lines[0] == f"  new file ({NEW_FILE_LINES + 6} lines):"
    assert lines[1].strip() == "line 0" and lines[-1].strip() == "... 6 more lines not shown"
    target.write_text("".join(f"line {i}\n" for i in range(200)))
    lines_after = [f"LINE {i}" if i % 10 == 0 else f"line {i}" for i in range(200)]
    diff = write_preview(target, "".join(f"{line}\n" for line in lines_after) + "tail \x1b]0;t\x07\n")
    assert diff is not None
    meta = {"diff": diff.diff, "diff_created": False, "diff_omitted_lines": 7}
    plain = render_diff(request(meta))
    assert len(plain) == MAX_DIFF_LINES + 2 and plain[0] == "  diff:"
    total = len(diff.diff.splitlines())
    assert plain[-1].strip() == f"... {total - MAX_DIFF_LINES + 7} more diff lines not shown"
    assert all("\x1b" not in line for line in plain)
    escaped = render_diff(request({"diff": "+tail \x1b]0;t\x07\n", "diff_created": False}))
    assert escaped[1].strip() == "+tail \\x1b]0;t\\x07"
    coloured = render_diff(request(meta), color=True)
    assert any(line.startswith("    \x1b[32m+LINE") for line in coloured)
    assert any(line.startswith("    \x1b[31m-line") for line in coloured)
    text = describe_request(request(meta))
    assert "  diff:" in text and text.index("diff:") < text.index("suggested:")
    assert "diff:" not in describe_request(request({}))


def test_run_prompt_shows_the_diff_it_would_apply(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_project("notes.txt", "alpha\nbeta\ngamma\n")
    script = TurnScript(
        lambda r: [("edit_file", {"path": "notes.txt", "edits": [{"old": "beta", "new": "BETA"}]})],
        lambda r: [("write_file", {"path": "new.py", "content": "print('hi')\n"})],
        lambda r: "done",
    )
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.handler(script)
    result = run_cli(["run", "--path", str(soong_env.project), "edit"], stdin="1\n1\n")
    assert result.exit_code == 0, result
    assert "  diff:\n" in result.stderr and "    -beta\n    +BETA\n" in result.stderr
    assert "  new file (1 line):\n    print('hi')\n" in result.stderr
    assert "\x1b[" not in result.stderr  # piped: no colour
    assert (soong_env.project / "notes.txt").read_text() == "alpha\nBETA\ngamma\n"
