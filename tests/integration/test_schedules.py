"""Cron schedules (docs/jobs-and-schedules.md#schedules, issue 22): SDK add/list/remove, due firings with a
controllable clock, one catch-up after downtime (never a burst), firings into an existing session."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_core.errors import AgentCoreError, ErrorCode
from tests.fixtures.clock import FakeClock
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text
from tests.fixtures.runtime import open_runtime, rows, wait_for

T0 = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)


def user_texts(env: SoongEnv, session_id: str) -> list[str]:
    """What reached the model as user input: user messages and ``<inbox>`` notes (a firing's message
    arrives through the session's inbox, issue 36)."""
    out = []
    sql = f'SELECT content_json, node_type, role, metadata_json FROM "nodes_{session_id}" ORDER BY node_seq'
    for row in rows(env, sql):
        inbox = row["node_type"] == "system_note" and '"source":"inbox"' in (row["metadata_json"] or "")
        if (row["node_type"] == "message" and row["role"] == "user") or inbox:
            out.append(row["content_json"])
    return out


async def test_sdk_add_list_remove_and_bad_input(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider()) as rt:
        rt.scheduler(clock=FakeClock(T0))
        first = await rt.add_schedule("*/5 * * * *", "check the build")
        second = await rt.add_schedule("0 9 * * 1-5", "morning summary")
        listed = await rt.list_schedules()
        assert [s.schedule_id for s in listed] == [first, second]
        assert listed[0].next_due_at == datetime(2026, 3, 2, 10, 5, tzinfo=UTC)
        assert listed[1].next_due_at == datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
        assert listed[0].project == str(soong_env.project) and listed[0].session_id is None
        await rt.remove_schedule(first)
        assert [s.schedule_id for s in await rt.list_schedules()] == [second]
        for call in (
            rt.remove_schedule(first),
            rt.add_schedule("61 * * * *", "x"),
            rt.add_schedule("* * *", "x"),
            rt.add_schedule("* * * * *", "   "),
            rt.add_schedule("* * * * *", "x", session_id="no_such_session"),
        ):
            with pytest.raises(AgentCoreError) as info:
                await call
            assert info.value.code == ErrorCode.validation_error
        assert [s.schedule_id for s in await rt.list_schedules()] == [second]
    other = soong_env.project.parent / "other-project"
    other.mkdir()
    async with open_runtime(soong_env, FakeProvider(), write_config=False, project_dir=other) as rt:
        rt.scheduler(clock=FakeClock(T0))
        mine = await rt.add_schedule("@hourly", "other project")
        assert [s.schedule_id for s in await rt.list_schedules()] == [mine]
        assert [s.schedule_id for s in await rt.list_schedules(all_projects=True)] == [second, mine]


async def test_due_schedule_fires_a_run_at_its_time(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("done one"), text("done two"))
    clock = FakeClock(T0)
    async with open_runtime(soong_env, fake) as rt:
        service = rt.scheduler(clock=clock)
        schedule_id = await rt.add_schedule("*/5 * * * *", "check the build")
        assert await service.start() == []  # nothing due yet
        await clock.wait_sleeping()
        await clock.advance(timedelta(minutes=4))
        await clock.wait_sleeping()
        assert service.firings == [] and fake.requests == []
        await clock.advance(timedelta(minutes=1))  # 10:05:30: due
        await wait_for(lambda: len(service.firings) == 1)
        firing = service.firings[0]
        assert firing.error is None and firing.run is not None
        assert str(await firing.run.wait()) in {"completed", "RunStatus.completed"}
        assert len(fake.requests) == 1
        texts = user_texts(soong_env, firing.run.session_id)
        assert len(texts) == 1 and "check the build" in texts[0] and 'kind=\\"schedule\\"' in texts[0]
        (stored,) = await rt.list_schedules()
        assert stored.schedule_id == schedule_id
        assert stored.next_due_at == datetime(2026, 3, 2, 10, 10, tzinfo=UTC)
        assert stored.last_run_id == firing.run.run_id and stored.last_session_id == firing.run.session_id
        # the next occurrence starts a second run (a new session: the schedule names none)
        await clock.wait_sleeping()
        await clock.advance(timedelta(minutes=5))
        await wait_for(lambda: len(service.firings) == 2)
        second = service.firings[1].run
        assert second is not None
        await second.wait()
        assert second.session_id != firing.run.session_id
        await service.stop()
        assert not service.running


async def test_one_catch_up_after_downtime_never_a_burst(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider()) as rt:
        rt.scheduler(clock=FakeClock(T0))
        await rt.add_schedule("*/5 * * * *", "catch up please")
    # three hours later (36 occurrences missed while nothing was running)
    fake = FakeProvider(text("caught up"), text("on time"))
    clock = FakeClock(T0 + timedelta(hours=3))
    async with open_runtime(soong_env, fake, write_config=False) as rt:
        service = rt.scheduler(clock=clock)
        fired = await service.start()
        assert len(fired) == 1 and fired[0].run is not None
        await fired[0].run.wait()
        await clock.wait_sleeping()
        assert len(service.firings) == 1 and len(fake.requests) == 1
        (stored,) = await rt.list_schedules()
        assert stored.next_due_at == datetime(2026, 3, 2, 13, 5, tzinfo=UTC)
        await clock.advance(timedelta(minutes=5))
        await wait_for(lambda: len(service.firings) == 2)
        assert service.firings[1].run is not None
        await service.firings[1].run.wait()
        assert len(fake.requests) == 2


async def test_schedule_into_an_existing_session_and_a_failing_firing(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("first"), text("scheduled reply"))
    clock = FakeClock(T0)
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        await run.wait()
        service = rt.scheduler(clock=clock)
        await rt.add_schedule("*/5 * * * *", "continue here", session_id=run.session_id)
        await clock.advance(timedelta(minutes=5))
        fired = await service.tick()
        assert len(fired) == 1 and fired[0].run is not None
        assert fired[0].run.session_id == run.session_id
        await fired[0].run.wait()
        texts = user_texts(soong_env, run.session_id)
        assert len(texts) == 2 and "continue here" in texts[1]
        # a schedule whose session is gone records the error and stays
        other = await rt.add_schedule("*/5 * * * *", "orphan", session_id=run.session_id)
        await rt.delete_session(run.session_id)
        await clock.advance(timedelta(minutes=5))
        fired = await service.tick()
        failed = [f for f in fired if f.schedule_id == other]
        assert failed and failed[0].run is None and failed[0].error
        assert "validation_error" in failed[0].error
        stored = {s.schedule_id: s for s in await rt.list_schedules()}
        assert stored[other].last_error and stored[other].next_due_at > clock.now()
