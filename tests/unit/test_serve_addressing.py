"""Pure parts of ``soong-agent serve`` (docs/serve.md#addressing-workers): ``@<worker>`` addressing and
``Last-Event-ID`` parsing (the server's HTTP behaviour is covered end to end in
tests/e2e/test_serve_live.py)."""

from __future__ import annotations

import pytest

from agent_core.errors import AgentCoreError
from agent_core.server._addressing import addressed_message, addressed_workers
from agent_core.server._sse import Cursor
from agent_core.types.content import JsonBlock, TextBlock
from agent_core.types.workers import WorkerView


def worker(pool_id: str, worker_id: str) -> WorkerView:
    return WorkerView(
        worker_pool_id=pool_id,
        worker_agent_id=worker_id,
        agent_definition_id="default_worker_agent",
        name="Default Worker Agent",
        description="d",
        status="idle",
    )


WORKERS = [worker("default", "w1"), worker("default", "reviewer"), worker("ops", "w1")]


def ids(found: list[WorkerView]) -> list[tuple[str, str]]:
    return [(w.worker_pool_id, w.worker_agent_id) for w in found]


def test_mentions_resolve_to_workers_in_order_once() -> None:
    text = "@reviewer look, then @default/w1. Again @reviewer, and @ops/w1 at the end."
    assert ids(addressed_workers(text, WORKERS)) == [
        ("default", "reviewer"),
        ("default", "w1"),
        ("ops", "w1"),
    ]


def test_mentions_of_no_worker_mail_addresses_and_paths_stay_plain_text() -> None:
    text = "mail me@host.org, see @nobody, a/@reviewer path, x.@reviewer, email@reviewer"
    assert addressed_workers(text, WORKERS) == []
    assert addressed_workers("@default/nobody @nopool/reviewer", WORKERS) == []


def test_an_id_in_several_pools_needs_the_pool() -> None:
    with pytest.raises(AgentCoreError) as caught:
        addressed_workers("please @w1 do it", WORKERS)
    assert caught.value.code.value == "validation_error"
    assert caught.value.details["choices"] == ["@default/w1", "@ops/w1"]


def test_the_addressed_message_keeps_the_text_and_adds_the_request() -> None:
    message = addressed_message("@reviewer check it", [WORKERS[1]])
    first, second = message.content
    assert isinstance(first, TextBlock) and first.text == "@reviewer check it"
    assert isinstance(second, JsonBlock)
    request = second.data["addressed_workers"]
    assert request["workers"] == [
        {"worker_pool_id": "default", "worker_agent_id": "reviewer", "name": "Default Worker Agent"}
    ]
    assert "agent.dispatch_worker" in request["request"]
    assert message.metadata == {
        "addressed_workers": [{"worker_pool_id": "default", "worker_agent_id": "reviewer"}]
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, Cursor(0, None)),
        ("7", Cursor(7, None)),
        ("7.42", Cursor(7, 42)),
        ("0.3", Cursor(0, 3)),
    ],
)
def test_last_event_id_forms(raw: str | None, expected: Cursor) -> None:
    assert Cursor.parse(raw) == expected


@pytest.mark.parametrize("raw", ["", "x", "7.", ".4", "7.4.1", "-1", "1" * 13, "7 "])
def test_malformed_last_event_ids_are_refused(raw: str) -> None:
    assert Cursor.parse(raw) is None
