"""``soong-agent``'s parser (agent_core/cli/__init__.py): given its first argument, ``main`` registers only
that command's subparser (cold start, issue 16); for that command's arguments the result — the namespace,
the help and usage text, the error and its exit status — is the full parser's."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from agent_core import cli

CASES = [
    ["run", "--help"],
    ["run"],
    ["run", "--bogus", "hi"],
    ["run", "hi", "extra"],
    ["run", "  "],
    ["run", "--path", "/p", "--orchestrator", "--session-id", "s1", "--debug", "hi"],
    ["chat", "--help"],
    ["serve", "--port", "x"],
    ["serve", "--help"],
    ["schedule", "--help"],
    ["schedule", "add", "--help"],
    ["schedule", "list"],
    ["scheduler", "--help"],
    ["audit", "--help"],
    ["worker", "--help"],
    ["task-wal"],
    ["task-wal", "list", "--help"],
]


def _outcome(parser_command: str | None, argv: list[str]) -> tuple[Any, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result: Any = sorted(vars(cli.build_parser(parser_command).parse_args(argv)).items())
        except SystemExit as exc:
            result = ("exit", exc.code)
    return result, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", CASES, ids=" ".join)
def test_the_command_parser_behaves_as_the_full_parser(argv: list[str]) -> None:
    assert _outcome(argv[0], argv) == _outcome(None, argv)


def test_main_registers_only_the_named_command(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[str] = []
    spies: dict[Any, Any] = {}
    for add in set(cli._COMMANDS.values()):

        def spy(sub: Any, add: Any = add) -> None:
            registered.append(add.__name__)
            add(sub)

        spies[add] = spy
    monkeypatch.setattr(cli, "_COMMANDS", {name: spies[add] for name, add in cli._COMMANDS.items()})
    assert cli.main(["run", "--help"]) == 0
    assert registered == ["_add_run"]
    registered.clear()
    assert cli.main(["--help"]) == 0
    assert registered == [
        "_add_run",
        "_add_chat",
        "_add_serve",
        "_add_acp",
        "_add_mcp_server",
        "_add_schedule",
        "_add_audit",
        "_add_worker",
        "_add_task_wal",
        "_add_channels",
    ]
