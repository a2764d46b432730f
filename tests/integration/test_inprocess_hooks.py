"""In-process hooks and output guardrails through the public API (issue 37 item 6).

Each test gives ``AgentRuntime`` (via the testing kit's ``open_runtime``) Python callables and checks
their effect on the run: what the model was sent, what was stored (``replay_session``), which events were
recorded and what the tools did on disk.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_core import (
    AgentCoreError,
    GuardrailInput,
    GuardrailResult,
    HookResult,
    OutputGuardrail,
    PermissionDecision,
    PermissionRequest,
    PostToolUseHook,
    PostToolUseInput,
    PreToolUseHook,
    PreToolUseInput,
    SessionStartHook,
    SessionStartInput,
    StopHook,
    StopInput,
    UserPromptSubmitHook,
    UserPromptSubmitInput,
)
from agent_core.testing import CallTool, FunctionModel, ModelReply, last_user_text, open_runtime
from agent_core.types.content import TextBlock, ToolResultBlock, text_of
from agent_core.types.model import ModelRequest

HOOK_SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "hook_script.py"


def texts(request: ModelRequest) -> list[str]:
    return [text_of(m.content) for m in request.messages]


def hook_events(replay: Any, kind: str) -> list[dict[str, Any]]:
    return [dict(e.payload) for e in replay.events if e.event_type.value == kind]


def tool_result(request: ModelRequest, call_id: str) -> ToolResultBlock:
    for message in request.messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock) and block.tool_call_id == call_id:
                return block
    raise AssertionError(f"no result for {call_id}")


def write_then_answer(path: str = "a.txt", content: str = "hello") -> FunctionModel:
    def reply(request: ModelRequest) -> str | ModelReply:
        if not any(m.role == "tool" for m in request.messages):
            return ModelReply(
                tool_calls=[
                    CallTool("code.write_file", {"path": path, "content": content}, tool_call_id="w1")
                ]
            )
        return "written"

    return FunctionModel(reply)


async def allow_all(request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision(decision="allow_once")


# -- UserPromptSubmit ------------------------------------------------------------------------------


async def test_user_prompt_submit_blocks_the_message(tmp_path: Path) -> None:
    def no_secrets(event: UserPromptSubmitInput) -> HookResult | None:
        return HookResult.deny("the message holds a password") if "hunter2" in event.prompt else None

    model = FunctionModel(lambda request: "never")
    hooks = [UserPromptSubmitHook(no_secrets, name="no-secrets")]
    async with open_runtime(model, project_dir=tmp_path, hooks=hooks) as rt:
        run = await rt.start("my password is hunter2")
        await run.wait()
        replay = await rt.replay_session(run.session_id, include_sensitive=True)
    assert run.status.value == "failed"
    assert run.error is not None and run.error.code.value == "permission_denied"
    assert "no-secrets" in run.error.message and "holds a password" in run.error.message
    assert model.requests == []  # the model never saw it
    assert "hunter2" not in json.dumps([n.model_dump(mode="json") for n in replay.nodes])
    (started,) = hook_events(replay, "hook_started")
    assert started["phase"] == "UserPromptSubmit" and started["command"] == "python:no-secrets"
    assert hook_events(replay, "hook_completed")[0]["decision"] == "deny"
    assert hook_events(replay, "hook_denied")[0]["reason"] == "the message holds a password"


async def test_user_prompt_submit_replaces_the_message(tmp_path: Path) -> None:
    async def expand(event: UserPromptSubmitInput) -> HookResult:
        return HookResult.replace_message(event.prompt.replace("$TICKET", "TICKET-42: fix the login"))

    def second(event: UserPromptSubmitInput) -> None:
        seen.append(event.prompt)

    seen: list[str] = []
    model = FunctionModel(lambda request: f"got: {last_user_text(request)}")
    hooks = [UserPromptSubmitHook(expand), UserPromptSubmitHook(second)]
    async with open_runtime(model, project_dir=tmp_path, hooks=hooks) as rt:
        run = await rt.start("please do $TICKET")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    assert run.status.value == "completed"
    assert last_user_text(model.requests[0]) == "please do TICKET-42: fix the login"
    assert seen == ["please do TICKET-42: fix the login"]  # the next hook sees the replacement
    (user,) = [n for n in replay.nodes if n.role == "user" and n.node_type == "message"]
    assert text_of(user.content) == "please do TICKET-42: fix the login"
    assert "$TICKET" not in json.dumps(user.model_dump(mode="json"))
    assert len(hook_events(replay, "hook_completed")) == 2


# -- PreToolUse ------------------------------------------------------------------------------------


async def test_pre_tool_use_denies_a_call(tmp_path: Path) -> None:
    def guard(event: PreToolUseInput) -> HookResult | None:
        if event.arguments["path"].endswith(".txt"):
            return HookResult.deny("no text files here")
        return None

    model = write_then_answer()
    hooks = [PreToolUseHook(guard, tool_name="code.write_file")]
    async with open_runtime(model, project_dir=tmp_path, permission_callback=allow_all, hooks=hooks) as rt:
        run = await rt.start("write it")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    assert not (tmp_path / "a.txt").exists()
    result = tool_result(model.requests[-1], "w1")
    assert result.is_error and "no text files here" in text_of(result.content)
    (denied,) = hook_events(replay, "tool_denied")
    assert denied["denied_by"] == "hook" and denied["permission_audit"]["decided_by"] == "hook"


async def test_pre_tool_use_replacement_is_what_the_permission_gate_sees(tmp_path: Path) -> None:
    def into_drafts(event: PreToolUseInput) -> HookResult:
        return HookResult.replace_arguments({**event.arguments, "path": "drafts/" + event.arguments["path"]})

    asked: list[PermissionRequest] = []

    async def callback(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        return PermissionDecision(decision="allow_once")

    model = write_then_answer()
    hooks = [PreToolUseHook(into_drafts, tool_name="code.write_file", name="drafts")]
    async with open_runtime(model, project_dir=tmp_path, permission_callback=callback, hooks=hooks) as rt:
        run = await rt.start("write it")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    assert (tmp_path / "drafts" / "a.txt").read_text() == "hello"
    assert not (tmp_path / "a.txt").exists()
    (request,) = asked
    assert "drafts/a.txt" in request.args_summary
    assert request.target_scope == str((tmp_path / "drafts" / "a.txt").resolve())
    assert request.hook_summary is not None and request.hook_summary["arguments_rewritten_by"] == ["drafts"]
    (started,) = hook_events(replay, "tool_started")
    assert "drafts/a.txt" in started["args_summary"]
    assert started["permission_audit"]["arguments_rewritten_by"] == ["drafts"]


async def test_pre_tool_use_replacement_is_validated(tmp_path: Path) -> None:
    def broken(event: PreToolUseInput) -> HookResult:
        return HookResult(arguments={"path": 7})

    model = write_then_answer()
    hooks = [PreToolUseHook(broken, name="broken")]
    async with open_runtime(model, project_dir=tmp_path, permission_callback=allow_all, hooks=hooks) as rt:
        run = await rt.start("write it")
        await run.wait()
    result = tool_result(model.requests[-1], "w1")
    assert result.is_error and "broken gave invalid arguments" in text_of(result.content)
    assert not (tmp_path / "a.txt").exists()


async def test_a_raising_pre_tool_use_hook_denies_the_call(tmp_path: Path) -> None:
    def crash(event: PreToolUseInput) -> None:
        raise RuntimeError("policy service down")

    model = write_then_answer()
    async with open_runtime(
        model, project_dir=tmp_path, permission_callback=allow_all, hooks=[PreToolUseHook(crash)]
    ) as rt:
        run = await rt.start("write it")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    assert not (tmp_path / "a.txt").exists()
    (failed,) = hook_events(replay, "hook_failed")
    assert "RuntimeError: policy service down" in failed["error"]["message"]
    assert run.status.value == "completed"  # the model was told and answered


async def test_in_process_hooks_run_before_hooks_json_which_sees_the_replacement(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    log = tmp_path / "shell-hook.jsonl"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(HOOK_SCRIPT))} --log {shlex.quote(str(log))}"
    hooks_json = {
        "version": 1,
        "hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": command}]}]},
    }
    (home / "hooks.json").write_text(json.dumps(hooks_json))

    def into_drafts(event: PreToolUseInput) -> HookResult:
        return HookResult(arguments={**event.arguments, "path": "drafts/" + event.arguments["path"]})

    project = tmp_path / "project"
    project.mkdir()
    model = write_then_answer()
    hooks = [PreToolUseHook(into_drafts, name="drafts")]
    async with open_runtime(
        model, project_dir=project, home_dir=home, permission_callback=allow_all, hooks=hooks
    ) as rt:
        run = await rt.start("write it")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["input"]["arguments"]["path"] == "drafts/a.txt"
    assert record["input"]["target_paths"] == [str((project / "drafts" / "a.txt").resolve())]
    commands = [e["command"] for e in hook_events(replay, "hook_started")]
    assert commands[0] == "python:drafts" and HOOK_SCRIPT.name in commands[1]


async def test_hooks_of_one_event_run_in_order_and_a_deny_stops_the_rest(tmp_path: Path) -> None:
    calls: list[str] = []

    def first(event: PreToolUseInput) -> None:
        calls.append("first")

    async def second(event: PreToolUseInput) -> HookResult:
        calls.append("second")
        return HookResult.deny("stop here")

    def third(event: PreToolUseInput) -> None:
        calls.append("third")

    model = write_then_answer()
    hooks = [PreToolUseHook(first), PreToolUseHook(second), PreToolUseHook(third)]
    async with open_runtime(model, project_dir=tmp_path, permission_callback=allow_all, hooks=hooks) as rt:
        run = await rt.start("write it")
        await run.wait()
    assert calls == ["first", "second"]


# -- PostToolUse, SessionStart, Stop --------------------------------------------------------------


async def test_post_tool_use_and_session_start_observe(tmp_path: Path) -> None:
    seen: list[tuple[str, Any]] = []

    def started(event: SessionStartInput) -> None:
        seen.append(("start", event.source))

    def after(event: PostToolUseInput) -> HookResult:
        seen.append(("post", (event.tool_name, event.result.is_error, event.context.agent_role)))
        return HookResult.deny("ignored: observe only")

    model = write_then_answer()
    hooks = [SessionStartHook(started), PostToolUseHook(after, tag="write")]
    async with open_runtime(model, project_dir=tmp_path, permission_callback=allow_all, hooks=hooks) as rt:
        run = await rt.start("write it")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    assert (tmp_path / "a.txt").read_text() == "hello"  # the deny of an observe-only hook changes nothing
    assert seen == [("start", "new"), ("post", ("code.write_file", False, "main"))]
    post = [e for e in hook_events(replay, "hook_completed") if e["phase"] == "PostToolUse"]
    assert post[0]["ignored"] is True


async def test_stop_hook_makes_the_agent_continue(tmp_path: Path) -> None:
    def once(event: StopInput) -> HookResult | None:
        return None if event.stop_hook_active else HookResult.deny("run the tests first")

    model = FunctionModel(lambda request: f"answer {len(request.messages)}")
    async with open_runtime(model, project_dir=tmp_path, hooks=[StopHook(once)]) as rt:
        run = await rt.start("go")
        await run.wait()
    assert run.status.value == "completed" and len(model.requests) == 2
    assert any("run the tests first" in t for t in texts(model.requests[1]))


# -- output guardrails -------------------------------------------------------------------------------


async def test_guardrail_rejection_is_shown_once_and_the_model_answers_again(tmp_path: Path) -> None:
    attempts: list[int] = []

    def no_todo(event: GuardrailInput) -> GuardrailResult | None:
        attempts.append(event.attempt)
        return GuardrailResult.reject("the answer must not leave TODOs") if "TODO" in event.answer else None

    answers = iter(["Plan: TODO later", "Plan: do it now"])
    model = FunctionModel(lambda request: next(answers))
    async with open_runtime(
        model, project_dir=tmp_path, hooks=[OutputGuardrail(no_todo, name="no-todo")]
    ) as rt:
        run = await rt.start("plan")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    assert run.status.value == "completed" and attempts == [1, 2]
    retry = texts(model.requests[1])
    assert sum("must not leave TODOs" in t for t in retry) == 1
    assert [t for t in retry if "no-todo rejected" in t]
    final = [n for n in replay.nodes if n.role == "assistant"][-1]
    assert text_of(final.content) == "Plan: do it now"
    assert hook_events(replay, "hook_denied")[0]["phase"] == "OutputGuardrail"


async def test_guardrail_rejecting_beyond_its_retries_fails_the_run(tmp_path: Path) -> None:
    model = FunctionModel(lambda request: "still bad")
    guard = OutputGuardrail(lambda event: GuardrailResult.reject("bad"), name="strict", max_retries=1)
    async with open_runtime(model, project_dir=tmp_path, hooks=[guard]) as rt:
        run = await rt.start("go")
        await run.wait()
    assert run.status.value == "failed" and len(model.requests) == 2
    assert run.error is not None and run.error.type == "guardrail_rejected"
    assert run.error.code.value == "validation_error" and run.error.details["guardrail"] == "strict"


async def test_a_failing_guardrail_fails_the_run(tmp_path: Path) -> None:
    async def broken(event: GuardrailInput) -> GuardrailResult:
        raise ValueError("classifier unavailable")

    model = FunctionModel(lambda request: "answer")
    async with open_runtime(model, project_dir=tmp_path, hooks=[OutputGuardrail(broken)]) as rt:
        run = await rt.start("go")
        await run.wait()
    assert run.status.value == "failed"
    assert run.error is not None and run.error.type == "guardrail_failed"
    assert "classifier unavailable" in run.error.message


@pytest.mark.parametrize("bad", [[print], "PreToolUseHook", [PreToolUseHook("not callable")]])  # type: ignore[arg-type]
async def test_invalid_hooks_are_refused(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(AgentCoreError) as caught:
        async with open_runtime(FunctionModel(lambda r: "x"), project_dir=tmp_path, hooks=bad):
            pass
    assert caught.value.code.value == "validation_error"


async def test_hook_text_blocks_are_plain(tmp_path: Path) -> None:
    """The note of a rejected answer is a plain text note the model reads, never a system instruction."""
    answers = iter(["one", "two"])
    model = FunctionModel(lambda request: next(answers))
    guard = OutputGuardrail(lambda e: GuardrailResult.reject("say two") if e.answer == "one" else None)
    async with open_runtime(model, project_dir=tmp_path, hooks=[guard]) as rt:
        run = await rt.start("go")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    (note,) = [n for n in replay.nodes if n.node_type == "system_note"]
    assert note.role == "user" and note.metadata["source"] == "guardrail"
    assert isinstance(note.content[0], TextBlock)
    assert all("say two" not in b.content for b in model.requests[1].system)
