"""Several processes on one home and one session (issue 40): ``serve``, ``chat`` (a real pty), ``run`` and a
long-lived SDK process take turns, arrive during another process's long tool call, and are killed mid-run.

Every process is real and shares the test's home (``SOONG_AGENT_HOME``, the default SQLite store) and one
scripted Ollama server (the public testing kit). The model calls ``demo.gate`` for ``gate <label>``: a
declarative tool that notes it started and then waits until the test opens its gate file, so "during a long
tool call" does not depend on timing. Afterwards the session is read through ``replay_session`` only: seqs
contiguous, every run terminal, the nodes one chain, every tool call exactly one result — the real one
unless its process was killed — and every model request carried the whole conversation before it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentRuntime
from agent_core.testing import OllamaWire, ScriptedOllamaServer, ScriptedRequest, advertised_tool_name, stream
from agent_core.types.content import TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.runtime import ReplayResult
from tests.fixtures.chat_pty import ChatTerminal
from tests.fixtures.cli import cli_command, cli_env, run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.serve import ServeProcess, sse_json, start_serve
from tests.reliability.invariants import path_pairing_problems, seq_problems

SDK_CHILD = Path(__file__).resolve().parents[1] / "fixtures" / "sdk_session_child.py"
BUSY_EXIT = 75
GATE_TOOL = """\
import json, os, sys, time
sys.stdin.read()
gate, label = sys.argv[1], sys.argv[2]
with open(gate + ".started", "a", encoding="utf-8") as fh:
    fh.write(label + "\\n")
deadline = time.monotonic() + 60
while not os.path.exists(gate) and time.monotonic() < deadline:
    time.sleep(0.02)
with open(gate + ".finished", "a", encoding="utf-8") as fh:
    fh.write(label + "\\n")
print(json.dumps({"content": [{"type": "text", "text": "gate passed: " + label}]}))
"""


def _user_texts(request: ScriptedRequest) -> list[str]:
    messages = (request.json or {}).get("messages", [])
    return [str(m.get("content") or "") for m in messages if m.get("role") == "user"]


class GateModel:
    """Ollama handler: ``gate <label>`` → a ``demo.gate`` call; after a tool result → ``Done: <result>``;
    anything else → ``Echo: <message>``. Records the user messages of every request."""

    def __init__(self) -> None:
        self.conversations: list[list[str]] = []
        self._lock = threading.Lock()

    def __call__(self, request: ScriptedRequest) -> Any:
        messages = (request.json or {}).get("messages", [])
        with self._lock:
            self.conversations.append(_user_texts(request))
        if messages and messages[-1].get("role") == "tool":
            return stream(OllamaWire.text_stream(f"Done: {str(messages[-1].get('content'))[:60]}"))
        text = _user_texts(request)[-1].strip()
        if text.startswith("gate "):
            name = advertised_tool_name(request, "gate")
            call = OllamaWire.tool_calls([(name, {"label": text[len("gate ") :]})])
            return stream([call, OllamaWire.done("stop")])
        return stream(OllamaWire.text_stream("Echo: ", text))


class Home:
    """The shared home, project, model server and gate of one test."""

    def __init__(self, env: SoongEnv, server: ScriptedOllamaServer, tmp: Path) -> None:
        self.env = env
        self.server = server
        self.model = GateModel()
        self.gate = tmp / "gate"
        script = tmp / "gate_tool.py"
        script.write_text(GATE_TOOL, encoding="utf-8")
        env.write_config(
            model={"provider": "ollama", "base_url": server.base_url, "context_window": 65536},
            tools={"default_timeout_ms": 60000},
        )
        spec = {
            "name": "demo.gate",
            "description": "Waits at a gate.",
            "permission": "readonly",
            "input_schema": {
                "type": "object",
                "properties": {"label": {"type": "string"}},
                "required": ["label"],
            },
            "command": sys.executable,
            "args": [str(script), str(self.gate), "{{args.label}}"],
        }
        env.write_home("tools/gate.json", json.dumps(spec))
        server.handler(self.model)
        server.allow_unconsumed = True

    def started(self) -> list[str]:
        marker = Path(f"{self.gate}.started")
        return marker.read_text(encoding="utf-8").split() if marker.exists() else []

    def finished(self) -> list[str]:
        marker = Path(f"{self.gate}.finished")
        return marker.read_text(encoding="utf-8").split() if marker.exists() else []

    def open_gate(self) -> None:
        self.gate.write_text("open", encoding="utf-8")

    def run(self, *args: str) -> Any:
        return run_cli(["run", "--path", str(self.env.project), *args], timeout=90)

    def replay(self, session_id: str) -> ReplayResult:
        async def read() -> ReplayResult:
            async with AgentRuntime(project_dir=self.env.project) as runtime:
                return await runtime.replay_session(session_id)

        return asyncio.run(read())


@pytest.fixture
def home(soong_env: SoongEnv, tmp_path: Path) -> Iterator[Home]:
    with ScriptedOllamaServer() as server:
        yield Home(soong_env, server, tmp_path)
        server.verify()


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Lines:
    """A child's output stream read into a list of lines by a thread."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait(self, fragment: str, what: str = "", timeout: float = 45) -> str:
        wait_for(lambda: any(fragment in line for line in self.lines), what or repr(fragment), timeout)
        return next(line for line in self.lines if fragment in line)

    def text(self) -> str:
        return "\n".join(self.lines)


class Background:
    """A CLI or SDK child with stdout and stderr read in the background."""

    def __init__(self, argv: list[str], *, stdin: Any = subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env()
        )
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def __str__(self) -> str:
        return f"--- stdout ---\n{self.out.text()}\n--- stderr ---\n{self.err.text()}"


def start_run(home: Home, *args: str) -> Background:
    return Background(cli_command(["run", "--path", str(home.env.project), *args]))


class SdkChild(Background):
    """``sdk_session_child.py``: one open runtime, one run per line written to it."""

    def __init__(self, home: Home, session_id: str) -> None:
        super().__init__(
            [sys.executable, str(SDK_CHILD), str(home.env.project), session_id], stdin=subprocess.PIPE
        )

    def send(self, message: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(message + "\n")
        self.proc.stdin.flush()

    def turn(self, message: str) -> str:
        """Runs ``message``; the run's final status."""
        ended = len([line for line in self.out.lines if line.startswith("ended ")])
        self.send(message)
        wait_for(lambda: len([x for x in self.out.lines if x.startswith("ended ")]) > ended, "the SDK turn")
        return [x for x in self.out.lines if x.startswith("ended ")][-1].split()[-1]

    def close(self) -> int:
        if self.proc.stdin is not None and self.proc.poll() is None:
            self.proc.stdin.close()
        return self.wait()


def serve_start(server: ServeProcess, message: str, session_id: str | None) -> tuple[str, str]:
    """POSTs a run; its run id and session id."""
    body: dict[str, Any] = {"message": message}
    if session_id is not None:
        body["session_id"] = session_id
    with server.client() as client:
        created = client.post("/api/runs", json=body)
    assert created.status_code == 201, created.text
    data = created.json()
    return str(data["run_id"]), str(data["session_id"])


def serve_wait(server: ServeProcess, run_id: str, until: str | None = None) -> list[str]:
    """The event types of the run's SSE stream, read until it ends (or until an ``until`` event)."""
    seen: list[str] = []
    for message in server.events(run_id):
        seen.append(str(sse_json(message)["event_type"]))
        if seen[-1] == until:
            break
    return seen


def serve_turn(server: ServeProcess, message: str, session_id: str | None) -> tuple[str, list[str]]:
    run_id, session_id = serve_start(server, message, session_id)
    return session_id, serve_wait(server, run_id)


def chat_on(home: Home, session_id: str) -> ChatTerminal:
    term = ChatTerminal(["--path", str(home.env.project), "--session-id", session_id])
    term.wait_prompt()
    return term


# ---- what every scenario must leave behind --------------------------------------------------------


def assert_consistent(replay: ReplayResult) -> None:
    """Contiguous seqs and run seqs, every run terminal, one chain of nodes, every tool call answered once."""
    assert seq_problems(replay.events) == []
    nodes = replay.nodes
    assert [n.node_seq for n in nodes] == list(range(1, len(nodes) + 1))
    assert [n.parent_id for n in nodes] == [None, *(n.node_id for n in nodes[:-1])], "the nodes fork"
    assert path_pairing_problems(nodes) == []
    assert replay.runs and all(r.status.terminal for r in replay.runs), [
        (r.run_id, r.status) for r in replay.runs
    ]
    for run in replay.runs:
        types = [e.event_type for e in replay.events if e.run_id == run.run_id]
        ends = [t for t in types if t in ("loop_completed", "loop_failed", "loop_aborted", "run_cancelled")]
        assert len(ends) == 1, (run.run_id, run.status, types)


def user_texts(replay: ReplayResult) -> list[str]:
    out: list[str] = []
    for node in replay.nodes:
        if node.role == "user":
            out.append("".join(b.text for b in node.content if isinstance(b, TextBlock)))
    return out


def tool_results(replay: ReplayResult) -> dict[str, list[ToolResultBlock]]:
    """Tool call id → its results, for every call in the session."""
    calls = [b.tool_call_id for n in replay.nodes for b in n.content if isinstance(b, ToolCallBlock)]
    results = [b for n in replay.nodes for b in n.content if isinstance(b, ToolResultBlock)]
    return {c: [r for r in results if r.tool_call_id == c] for c in calls}


def result_text(result: ToolResultBlock) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextBlock))


def assert_history_carried(model: GateModel) -> None:
    """Each model request carried every user message sent before it (no process answered from a stale
    view of the session)."""
    longest: list[str] = []
    for conversation in model.conversations:
        assert conversation[: len(longest)] == longest[: len(conversation)], (conversation, longest)
        if len(conversation) > len(longest):
            longest = conversation


# ---- the scenarios ------------------------------------------------------------------------------------


def test_serve_chat_run_and_the_sdk_take_turns_on_one_session(home: Home) -> None:
    server = start_serve(home.env)
    sdk: SdkChild | None = None
    term: ChatTerminal | None = None
    try:
        session_id, events = serve_turn(server, "turn 1 from serve", None)
        assert "loop_completed" in events
        term = chat_on(home, session_id)
        term.say("turn 2 from chat")
        assert home.run("--session-id", session_id, "turn 3 from run").exit_code == 0
        sdk = SdkChild(home, session_id)
        assert sdk.turn("turn 4 from the sdk") == "completed", str(sdk)
        # the long-lived processes again, after the others wrote the session
        assert "loop_completed" in serve_turn(server, "turn 5 from serve", session_id)[1]
        term.say("turn 6 from chat")
        assert sdk.turn("turn 7 from the sdk") == "completed", str(sdk)
        home.open_gate()
        assert "loop_completed" in serve_turn(server, "gate 8 from serve", session_id)[1]
    finally:
        home.open_gate()
        if term is not None:
            term.send_line("/exit")
            term.finish()
        if sdk is not None:
            sdk.close()
        server.stop()
    replay = home.replay(session_id)
    assert_consistent(replay)
    assert user_texts(replay) == [
        "turn 1 from serve",
        "turn 2 from chat",
        "turn 3 from run",
        "turn 4 from the sdk",
        "turn 5 from serve",
        "turn 6 from chat",
        "turn 7 from the sdk",
        "gate 8 from serve",
    ]
    assert all(r.status == "completed" for r in replay.runs)
    assert [result_text(r) for rs in tool_results(replay).values() for r in rs] == [
        "gate passed: 8 from serve"
    ]
    assert_history_carried(home.model)


def test_a_process_arriving_during_a_long_tool_call_waits_its_turn(home: Home) -> None:
    server = start_serve(home.env)
    waiting: Background | None = None
    term: ChatTerminal | None = None
    try:
        run_id, session_id = serve_start(server, "gate first", None)
        wait_for(lambda: home.started() == ["first"], "serve's tool call")
        busy = home.run("--session-id", session_id, "refused while busy")
        assert busy.exit_code == BUSY_EXIT, str(busy)
        assert f"session {session_id} is busy" in busy.stderr and "--wait" in busy.stderr, str(busy)
        waiting = start_run(home, "--session-id", session_id, "--wait", "second from run")
        waiting.err.wait("[run] queued behind another run of this session", "run --wait queued")
        term = ChatTerminal(["--path", str(home.env.project), "--session-id", session_id])
        term.wait_prompt()
        term.send_line("third from chat")
        term.wait_text("[queued behind another run of this session")
        assert home.finished() == [], "the tool must still be running"
        home.open_gate()
        assert "loop_completed" in serve_wait(server, run_id)
        assert waiting.wait() == 0, str(waiting)
        term.wait_text("Echo: third from chat")
        term.wait_prompt(after=1)
    finally:
        home.open_gate()
        if term is not None:
            term.send_line("/exit")
            term.finish()
        if waiting is not None:
            waiting.kill()
        server.stop()
    replay = home.replay(session_id)
    assert_consistent(replay)
    assert user_texts(replay) == ["gate first", "second from run", "third from chat"]  # arrival order
    assert all(r.status == "completed" for r in replay.runs) and len(replay.runs) == 3
    (results,) = tool_results(replay).values()
    assert [result_text(r) for r in results] == ["gate passed: first"] and not results[0].is_error
    assert home.started() == home.finished() == ["first"]  # the tool ran once, and to its end
    assert_history_carried(home.model)


@pytest.mark.slow
def test_killing_the_running_sdk_process_mid_tool_call_hands_the_session_to_the_waiting_run(
    home: Home,
) -> None:
    first = home.run("hello from run")
    assert first.exit_code == 0, str(first)
    session_id = first.stderr.split("session_id: ")[-1].strip()
    sdk = SdkChild(home, session_id)
    waiting: Background | None = None
    try:
        sdk.send("gate doomed")
        sdk.out.wait("tool ", "the SDK run's tool call")
        wait_for(lambda: home.started() == ["doomed"], "the gate tool")
        waiting = start_run(home, "--session-id", session_id, "--wait", "after the kill")
        waiting.err.wait("[run] queued behind another run of this session", "run --wait queued")
        sdk.kill()
        assert waiting.wait() == 0, str(waiting)
    finally:
        sdk.kill()
        if waiting is not None:
            waiting.kill()
    replay = home.replay(session_id)
    assert_consistent(replay)
    assert user_texts(replay) == ["hello from run", "gate doomed", "after the kill"]
    assert [r.status for r in replay.runs] == ["completed", "failed", "completed"]
    assert replay.runs[1].error is not None and "interrupted" in replay.runs[1].error.message
    (results,) = tool_results(replay).values()  # the killed call: closed as interrupted, once
    assert len(results) == 1 and results[0].is_error and "interrupted" in result_text(results[0])
    assert home.finished() == []
    assert_history_carried(home.model)


@pytest.mark.slow
def test_killing_a_waiting_chat_leaves_no_run_pending_and_the_running_serve_run_ends_normally(
    home: Home,
) -> None:
    server = start_serve(home.env)
    term: ChatTerminal | None = None
    try:
        run_id, session_id = serve_start(server, "gate busy", None)
        wait_for(lambda: home.started() == ["busy"], "serve's tool call")
        term = chat_on(home, session_id)
        term.send_line("never answered")
        term.wait_text("[queued behind another run of this session")
        os.kill(term.child.pid, signal.SIGKILL)
        term.finish()
        home.open_gate()
        assert "loop_completed" in serve_wait(server, run_id)
        assert "loop_completed" in serve_turn(server, "after the chat died", session_id)[1]
    finally:
        home.open_gate()
        if term is not None:
            term.close()
        server.stop()
    replay = home.replay(session_id)
    assert_consistent(replay)
    statuses = {r.run_id: r.status for r in replay.runs}
    assert sorted(statuses.values()) == ["completed", "completed", "failed"]
    assert user_texts(replay) == ["gate busy", "after the chat died"]  # the killed chat wrote no node
    (results,) = tool_results(replay).values()
    assert [result_text(r) for r in results] == ["gate passed: busy"] and not results[0].is_error


def test_a_read_only_home_is_reported_as_read_only_naming_the_file(home: Home, tmp_path: Path) -> None:
    first = home.run("hello")
    assert first.exit_code == 0, str(first)
    fresh = tmp_path / "fresh-home"
    fresh.mkdir()
    (fresh / "config.toml").write_text(home.env.config_path.read_text(encoding="utf-8"), encoding="utf-8")
    for where in (home.env.home, fresh):  # a database already there, and none yet
        argv = cli_command(["run", "--path", str(home.env.project), "hello again"])
        read_only = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(where), str(where), "--", *argv]
        done = subprocess.run(
            read_only,
            capture_output=True,
            text=True,
            timeout=60,
            env=cli_env({"SOONG_AGENT_HOME": str(where)}),
            check=False,
        )
        assert done.returncode == 1, done.stderr
        (line,) = [x for x in done.stderr.splitlines() if x.startswith("soong-agent: error:")]
        assert "read-only" in line and str(where / "sessions.sqlite") in line, line
        assert "unable to open database file" not in done.stderr and "Traceback" not in done.stderr
