"""Fuzz (issue 10 item 6): hypothesis over code-tool arguments and ``code.edit_file`` diffs through the tool
executor — the exact entry point the loop calls for a turn.

Every call gets exactly one structured ``ToolResult`` (matching id, ``ErrorPayload`` with a known code on
errors); ``execute_turn`` never raises; and no exception escapes a tool as an anonymous ``internal_error``
(the only legitimate ``internal_error`` is a command's non-zero exit, which carries ``details.exit_code``).
The permission callback follows the runtime's suggestion, so fuzzed writes can never leave the project.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_core._ids import new_id
from agent_core.errors import ErrorCode
from agent_core.tools._builtin import CODE_TOOL_NAMES, CodeToolsAdapter
from agent_core.tools.registry import ToolRegistry
from agent_core.types.model import ToolCall
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from agent_core.types.tools import ToolResult
from tests.fixtures.tool_pipeline import make_executor, make_settings
from tests.fixtures.tool_sink import RecordingSink, make_scope

SHORT = 40
LONG = 400

# -- strategies -------------------------------------------------------------------------------------------

GOOD_FRAGMENTS = [
    "notes.txt",
    "sub",
    "sub/inner.txt",
    "..",
    ".",
    "~",
    "/",
    "/etc",
    "/proc/self",
    "link",
    "new",
    "a b",
    "ü",
]
BAD_FRAGMENTS = [".env", "k.pem", "\uff0e\uff0e", "x" * 300, "\x00", ""]
FRAGMENTS = GOOD_FRAGMENTS * 3 + BAD_FRAGMENTS
path_text = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=5).map("/".join),
    st.text(max_size=40),
)
json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False), st.text(max_size=20)
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
maybe_int = st.one_of(
    st.none(), st.integers(-5, 2000), st.sampled_from([2**31, -(2**31), 0, 1]), st.text(max_size=3)
)
noise = st.dictionaries(st.sampled_from(["extra", "env", "dry_run", "path2"]), json_value, max_size=1)


def with_noise(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly well-formed arguments (so the tools really run); sometimes an unknown extra key."""
    noisy = st.tuples(base, noise).map(lambda t: {**t[0], **t[1]})
    return st.one_of(base, base, base, noisy)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(good, good, good, bad)


read_args = with_noise(
    st.fixed_dictionaries(
        {"path": mostly(path_text, json_value)}, optional={"start_line": maybe_int, "max_lines": maybe_int}
    )
)
list_args = with_noise(
    st.fixed_dictionaries(
        {"path": path_text}, optional={"recursive": mostly(st.booleans(), json_scalar), "limit": maybe_int}
    )
)
search_args = with_noise(
    st.fixed_dictionaries(
        {
            "query": mostly(
                st.sampled_from(["line", "inner", "SECRET", "x"]) | st.text(max_size=12), json_scalar
            )
        },
        optional={
            "path": st.one_of(st.none(), path_text),
            "glob": st.one_of(st.none(), st.text(max_size=8)),
            "limit": maybe_int,
        },
    )
)
write_args = with_noise(
    st.fixed_dictionaries(
        {"path": path_text, "content": mostly(st.text(max_size=200), json_scalar)},
        optional={
            "create_dirs": mostly(st.booleans(), json_scalar),
            "overwrite": mostly(st.booleans(), json_scalar),
        },
    )
)
edit_entry = st.fixed_dictionaries(
    {
        "old": st.one_of(st.sampled_from(["", "line 1", "line", "\n", "zzz"]), st.text(max_size=10)),
        "new": st.text(max_size=20),
    },
    optional={"replace_all": st.one_of(st.booleans(), json_scalar)},
)
edit_args = with_noise(
    st.fixed_dictionaries(
        {
            "path": mostly(st.just("notes.txt"), path_text),
            "edits": mostly(st.lists(edit_entry, min_size=1, max_size=3), json_value),
        },
        optional={"create_if_missing": mostly(st.booleans(), json_scalar)},
    )
)
SAFE_COMMANDS = ["echo", "true", "false", "cat", "printf", "ls", "/bin/echo", "./nope", "no-such-cmd", ""]
"""Fuzzed commands start with one of these (never an arbitrary program); their arguments are free text."""
argv_strategy = st.one_of(
    st.tuples(st.sampled_from(SAFE_COMMANDS), st.lists(st.text(max_size=10), max_size=3)).map(
        lambda t: [t[0], *t[1]]
    ),
    st.just([]),
    st.text(max_size=10),
    json_scalar,
)
run_args = with_noise(
    st.fixed_dictionaries(
        {"argv": argv_strategy}, optional={"cwd": st.one_of(st.none(), path_text), "timeout_ms": maybe_int}
    )
)
TOOL_ARGS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "code.read_file": read_args,
    "code.list_dir": list_args,
    "code.search": search_args,
    "code.write_file": write_args,
    "code.edit_file": edit_args,
    "code.run_command": run_args,
}
one_call = st.sampled_from(sorted(TOOL_ARGS)).flatmap(
    lambda name: TOOL_ARGS[name].map(lambda args: (name, args))
)
turns = st.lists(one_call, min_size=1, max_size=4)


@st.composite
def diffs(draw: st.DrawFn) -> str:
    """Unified diffs built from the file's real lines, then perturbed (headers, counts, prefixes, markers)."""
    lines = NOTES.splitlines()
    start = draw(st.integers(0, len(lines)))
    size = draw(st.integers(0, 4))
    old = lines[start : start + size]
    body = [f" {line}" if draw(st.booleans()) else f"-{line}" for line in old]
    body += [f"+{t}" for t in draw(st.lists(st.text(alphabet="abc xyz", max_size=8), max_size=3))]
    if draw(st.integers(0, 4)) == 0:
        body.insert(
            draw(st.integers(0, len(body))),
            draw(st.sampled_from(["\\ No newline at end of file", "garbage", "", "@@ bad @@"])),
        )
    old_count = sum(1 for b in body if b[:1] in " -")
    new_count = sum(1 for b in body if b[:1] in " +")
    header_start = draw(st.one_of(st.just(start + 1), st.integers(-2, len(lines) + 3)))
    counts = draw(
        st.one_of(st.just((old_count, new_count)), st.tuples(st.integers(-1, 6), st.integers(-1, 6)))
    )
    hunk = f"@@ -{header_start},{counts[0]} +{header_start},{counts[1]} @@"
    head = draw(
        st.sampled_from(
            [
                "",
                "--- a/notes.txt\n+++ b/notes.txt\n",
                "--- notes.txt\n+++ notes.txt\n",
                "",
                "--- a/notes.txt\n+++ b/notes.txt\n",
                "--- a/../outside.txt\n+++ b/../outside.txt\n",
                "--- /dev/null\n+++ b/notes.txt\n",
                "--- a/notes.txt\n+++ /dev/null\n",
                "diff --git a/notes.txt b/notes.txt\nrename from notes.txt\nrename to other.txt\n",
                "--- a/notes.txt\n+++ b/notes.txt\n--- a/other\n+++ b/other\n",
                "Binary files a/notes.txt and b/notes.txt differ\n",
            ]
        )
    )
    text = head + hunk + "\n" + "\n".join(body) + ("\n" if draw(st.booleans()) else "")
    if draw(st.integers(0, 4)) == 0:
        text = text.replace("\n", draw(st.sampled_from(["\r\n", "\n\n", "\n"])))
    return text


# -- harness ----------------------------------------------------------------------------------------------

NOTES = "".join(f"line {i}\n" for i in range(1, 12))


class CarefulUser:
    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        return PermissionDecision(decision=request.suggested_decision)


class ErrorLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Rig:
    root: Path
    project: Path
    outside: Path
    executor: Any
    errors: ErrorLog
    outcomes: dict[str, int] = field(default_factory=dict)

    def reset_files(self) -> None:
        (self.project / "notes.txt").write_text(NOTES)
        (self.project / "sub").mkdir(exist_ok=True)
        (self.project / "sub" / "inner.txt").write_text("inner\n")

    def turn(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        prepared = [ToolCall(tool_call_id=new_id("call_"), name=name, arguments=args) for name, args in calls]
        scope = make_scope(self.project, self.root / "home", effective_tools=frozenset(CODE_TOOL_NAMES))
        sink = RecordingSink(self.root / "artifacts")
        before = len(self.errors.records)
        outcome = asyncio.run(asyncio.wait_for(self.executor.execute_turn(prepared, scope, sink), 30))
        assert len(outcome.results) == len(prepared)
        for call, result in zip(prepared, outcome.results, strict=True):
            check_result(call.name, call.tool_call_id, result)
            key = "ok" if not result.is_error else str(result.error.code.value if result.error else "?")
            self.outcomes[key] = self.outcomes.get(key, 0) + 1
        assert len(self.errors.records) == before, [r.getMessage() for r in self.errors.records[before:]]
        assert sorted(p.name for p in self.outside.iterdir()) == ["keep.txt"], (
            "a fuzzed write left the project"
        )


def check_result(name: str, call_id: str, result: ToolResult) -> None:
    assert isinstance(result, ToolResult)
    assert result.tool_call_id == call_id and result.tool_name == name
    if not result.is_error:
        assert result.error is None
        return
    assert result.error is not None and isinstance(result.error.code, ErrorCode)
    if result.error.code == ErrorCode.internal_error:
        assert name == "code.run_command" and "exit_code" in result.error.details, result.error


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    root = Path(tempfile.mkdtemp(prefix="soong-fuzz-")).resolve()
    project, outside = root / "project", root / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    (project / "link").symlink_to(outside)
    (project / ".env").write_text("SECRET=1\n")
    cfg = make_settings(tools={"default_timeout_ms": 3000})
    registry = ToolRegistry()
    registry.register_adapter(CodeToolsAdapter(cfg), internal=True)
    executor, _ = make_executor(registry, cfg, callback=CarefulUser(), cancel_grace_s=2.5)
    errors = ErrorLog()
    logger = logging.getLogger("agent_core")
    logger.addHandler(errors)
    rig = Rig(root, project, outside, executor, errors)
    rig.reset_files()
    yield rig
    logger.removeHandler(errors)
    print(f"fuzz outcomes: {dict(sorted(rig.outcomes.items()))}")


def fuzz(n: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


@fuzz(SHORT)
@given(calls=turns)
def test_fuzz_tool_arguments(rig: Rig, calls: list[tuple[str, dict[str, Any]]]) -> None:
    rig.reset_files()
    rig.turn(calls)


@fuzz(SHORT)
@given(diff=diffs(), create=st.booleans())
def test_fuzz_edit_file_diffs(rig: Rig, diff: str, create: bool) -> None:
    rig.reset_files()
    rig.turn([("code.edit_file", {"path": "notes.txt", "unified_diff": diff, "create_if_missing": create})])


@pytest.mark.slow
@fuzz(LONG)
@given(calls=turns)
def test_fuzz_tool_arguments_long(rig: Rig, calls: list[tuple[str, dict[str, Any]]]) -> None:
    rig.reset_files()
    rig.turn(calls)


@pytest.mark.slow
@fuzz(LONG)
@given(diff=diffs(), create=st.booleans())
def test_fuzz_edit_file_diffs_long(rig: Rig, diff: str, create: bool) -> None:
    rig.reset_files()
    rig.turn([("code.edit_file", {"path": "notes.txt", "unified_diff": diff, "create_if_missing": create})])
