"""``internal.ask_user`` (issue 37 item 3) through the public API: answered by the question callback, by
``runtime.answer_question`` after ``DEFER`` (first answer wins), an error result the model can act on when
nobody can answer, and a cancelled run abandoning its question. The question and the answer are in the
session (``replay_session``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_core import AgentCoreError
from agent_core.permissions import DEFER, PermissionDeferral
from agent_core.testing import CallTool, FunctionModel, ModelReply, ModelRequest, open_runtime, tool_results
from agent_core.types.permissions import UserQuestion

QUESTION = CallTool(
    "internal.ask_user",
    {"question": "Which database should the service use?", "options": ["SQLite", "PostgreSQL"]},
    "call_ask",
)


def asking_model() -> FunctionModel:
    """Asks once, then answers with what the tool returned."""

    def reply(request: ModelRequest) -> ModelReply:
        results = tool_results(request)
        if results:
            return ModelReply(text="result: " + results["call_ask"])
        return ModelReply(tool_calls=[QUESTION])

    return FunctionModel(reply)


def stored_result(replay: object) -> dict[str, object]:
    for node in replay.nodes:  # type: ignore[attr-defined]
        for block in node.content:
            if getattr(block, "tool_call_id", None) == "call_ask" and node.role == "tool":
                return {"is_error": block.is_error, "text": json.dumps(block.model_dump(mode="json"))}
    raise AssertionError("no stored result of the ask_user call")


async def test_answered_from_the_sdk_after_defer(tmp_path: Path) -> None:
    seen: list[UserQuestion] = []
    asked = asyncio.Event()

    async def defer(question: UserQuestion) -> str | PermissionDeferral:
        seen.append(question)
        asked.set()
        return DEFER

    model = asking_model()
    async with open_runtime(model, project_dir=tmp_path, question_callback=defer) as runtime:
        run = await runtime.start("set up the service")
        await asyncio.wait_for(asked.wait(), 10)
        await asyncio.sleep(0.1)  # it waits: no timeout, no implicit answer
        assert run.status.value == "running"
        question = seen[0]
        assert question.question == "Which database should the service use?"
        assert question.options == ["SQLite", "PostgreSQL"]
        assert (question.session_id, question.run_id, question.tool_call_id) == (
            run.session_id,
            run.run_id,
            "call_ask",
        )
        await runtime.answer_question(question.request_id, "PostgreSQL")
        with pytest.raises(AgentCoreError) as twice:
            await runtime.answer_question(question.request_id, "SQLite")
        assert twice.value.code == "validation_error"
        await run.wait()
        assert run.status.value == "completed"
        replay = await runtime.replay_session(run.session_id)
    assert "internal.ask_user" in {t.name for t in model.requests[0].tools}
    stored = stored_result(replay)
    assert stored["is_error"] is False and "PostgreSQL" in str(stored["text"])
    assert '"answer"' in str(model.requests[-1].messages[-1].model_dump_json())


async def test_answered_directly_by_the_callback(tmp_path: Path) -> None:
    async def answer(question: UserQuestion) -> str:
        return question.options[0]

    model = asking_model()
    async with open_runtime(model, project_dir=tmp_path, question_callback=answer) as runtime:
        run = await runtime.start("set up the service")
        await run.wait()
    assert run.status.value == "completed"
    assert '"answer":"SQLite"' in model.requests[-1].messages[-1].model_dump_json().replace(" ", "")


async def test_without_anyone_to_ask_the_model_gets_an_error_it_can_act_on(tmp_path: Path) -> None:
    model = asking_model()
    async with open_runtime(model, project_dir=tmp_path) as runtime:
        run = await runtime.start("set up the service")
        await run.wait()
        replay = await runtime.replay_session(run.session_id)
    assert run.status.value == "completed"  # the run goes on: the model decides itself
    stored = stored_result(replay)
    assert stored["is_error"] is True
    assert "tool_not_available" in str(stored["text"]) and "decide yourself" in str(stored["text"])
    with pytest.raises(AgentCoreError):
        async with open_runtime(model, project_dir=tmp_path) as runtime:
            await runtime.answer_question("ask_unknown", "x")


async def test_a_cancelled_run_abandons_its_question(tmp_path: Path) -> None:
    seen: list[UserQuestion] = []
    asked = asyncio.Event()

    async def defer(question: UserQuestion) -> PermissionDeferral:
        seen.append(question)
        asked.set()
        return DEFER

    async with open_runtime(asking_model(), project_dir=tmp_path, question_callback=defer) as runtime:
        run = await runtime.start("set up the service")
        await asyncio.wait_for(asked.wait(), 10)
        await run.cancel()
        assert run.status.value == "cancelled"
        with pytest.raises(AgentCoreError) as late:
            await runtime.answer_question(seen[0].request_id, "SQLite")
        assert late.value.code == "validation_error"
