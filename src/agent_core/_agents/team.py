"""Teammates (docs/teams.md): resident and finite agents with their own sessions, on the inbox.

Contracts:

- :meth:`Team.spawn` (a session root agent that is not itself a teammate): checks the name (unique among
  the lead's active teammates), ``[agents] max_teammates_per_session`` (``child_agent_limit_exceeded``),
  the agent definition and the worktree, then creates the teammate's session (a root agent of its own,
  same project, listed by ``list_sessions``, linked to the lead by the ``teammates`` row), writes
  ``teammate_spawned`` on the lead's run and delivers the task to the teammate's inbox, which wakes it.
  Its runs use the lead's permission gate (the runtime's), spend the lead's ``[limits]`` budget, get the
  team block and lose ``agent.team_spawn`` (:class:`~agent_core._runtime.state.SessionProfile`).
- :meth:`Team.send` delivers a ``message`` to a teammate's inbox (by name) or the lead's (``"lead"``).
- :meth:`Team.request` stores a ``team_requests`` row in the transaction that delivers the ``request``
  entry. ``plan_approval`` (teammate → lead) waits inside the call until the answer is in the caller's
  inbox and returns it (that tool result acknowledges the answer; a rejection is an error result, which
  skips the rest of the turn); ``shutdown`` (lead → teammate) returns the request id at once.
- :meth:`Team.respond` answers a pending request addressed to the caller exactly once (the row's update
  and the ``response`` delivery are one transaction) into the requester's inbox.
- A teammate's drain that reads a ``shutdown`` request answers it (approved), stops the teammate and ends
  its run without another model call: it finishes the step it was in, answers, stops.
- After each root run of a teammate (:meth:`Team.after_root_run`): its worktree's changes are committed;
  a non-resident teammate sends its final answer to the lead's inbox and stops; a resident autonomous
  teammate looks for a ready step to claim (:mod:`agent_core._agents.team_autonomy`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from agent_core._agents.registry import AgentDefinitionRegistry
from agent_core._agents.team_autonomy import TeamAutonomy
from agent_core._agents.team_profile import TeamProfiles
from agent_core._agents.team_store import (
    REQUEST_KINDS,
    RequestRecord,
    TeammateRecord,
    TeamStore,
    answer_guard,
    insert_request_guard,
)
from agent_core._agents.team_tool_definitions import NAME_PATTERN
from agent_core._events import payloads as ev
from agent_core._ids import new_id
from agent_core._inbox.service import Inbox
from agent_core._loop.outcome import LoopOutcome
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState, SessionState
from agent_core._storage.drafts import EventDraft
from agent_core._storage.inbox import StoredEntry
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.base import format_ts, parse_ts, utc_now
from agent_core.types.enums import EndReason, RunMode, RunStatus
from agent_core.types.inbox import InboxEntry
from agent_core.types.runtime import RuntimeEvent
from agent_core.types.team import TeamEvent, TeammateView

if TYPE_CHECKING:
    from agent_core._orchestrator.feature import TaskFeature
    from agent_core.tools.context import ToolContext

log = logging.getLogger("agent_core._agents")
LEAD = "lead"
_NAME = re.compile(NAME_PATTERN)
FEED_CAPACITY = 1000


def _invalid(message: str, **details: Any) -> AgentCoreError:
    return AgentCoreError(ErrorCode.validation_error, message, details=details)


class Team:
    """Every team of one runtime (``RunFeatures.team``): spawn, messages, requests and listings."""

    def __init__(
        self, manager: RunManager, inbox: Inbox, registry: AgentDefinitionRegistry, tasks: TaskFeature
    ) -> None:
        self.manager = manager
        self.inbox = inbox
        self.store = TeamStore(manager.services.storage)
        self.profiles = TeamProfiles(manager, registry, self.on_drained)
        self.autonomy = TeamAutonomy(manager, self.store, tasks)
        self.max_teammates = manager.services.settings.agents.max_teammates_per_session
        self._members: dict[str, TeammateRecord] = {}
        self._spawn_lock = asyncio.Lock()
        self._feeds: dict[str, list[asyncio.Queue[TeamEvent | None]]] = {}

    # ---- membership -------------------------------------------------------------------------------
    async def member(self, session_id: str) -> TeammateRecord | None:
        """The teammate whose session this is (``None``: not a teammate's session)."""
        known = self._members.get(session_id)
        if known is not None:
            return known
        record = await self.store.get(session_id)
        if record is not None:
            self._members[session_id] = record
        return record

    def remember(self, record: TeammateRecord) -> None:
        self._members[record.session_id] = record

    async def _lead_of(self, ctx: ToolContext) -> tuple[str, str]:
        """``(lead session, caller's name in the team)`` of the calling run."""
        me = await self.member(ctx.session_id)
        if me is not None:
            return me.lead_session_id, me.name
        session = self.manager.sessions.get(ctx.session_id)
        if session is None or session.root_agent_id != ctx.agent_id:
            raise _invalid("only a session's root agent leads a team")
        return ctx.session_id, LEAD

    async def _address(self, lead_session_id: str, to: str, sender: str) -> tuple[str, str, str]:
        """``(session, agent, name)`` of ``to`` in the team of ``lead_session_id``."""
        if to == sender:
            raise _invalid(f"{to!r} is you; name a teammate or the lead")
        if to == LEAD:
            record = await self.manager.services.storage.get_session(lead_session_id)
            if record is None:
                raise _invalid(f"the lead's session {lead_session_id} no longer exists")
            return lead_session_id, record.root_agent_id, LEAD
        mates = await self.store.of_lead(lead_session_id)
        for mate in reversed(mates):
            if mate.name == to and mate.state == "active":
                return mate.session_id, mate.agent_id, mate.name
        if any(m.name == to for m in mates):
            raise _invalid(f"teammate {to!r} has stopped; its inbox takes no more entries", teammate=to)
        names = ", ".join(m.name for m in mates if m.state == "active") or "none"
        raise _invalid(f"no teammate named {to!r} (teammates: {names}; the lead is {LEAD!r})", teammate=to)

    # ---- spawn ------------------------------------------------------------------------------------
    async def spawn(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        lead_sid, me = await self._lead_of(ctx)
        if me != LEAD:
            raise _invalid("a teammate cannot start teammates of its own")
        name = str(args["name"])
        if not _NAME.match(name) or name == LEAD:
            raise _invalid(f"invalid teammate name {name!r} (pattern {NAME_PATTERN}, not {LEAD!r})")
        task = str(args["task"]).strip()
        if not task:
            raise _invalid("task must be a non-empty string")
        resident = bool(args.get("resident", True))
        autonomous = bool(args.get("autonomous", False))
        isolation = str(args.get("isolation") or "shared")
        if isolation not in ("shared", "worktree"):
            raise _invalid(f"isolation must be 'shared' or 'worktree', got {isolation!r}")
        lead = self.manager.sessions[lead_sid]
        pool = await self.autonomy.check_scope(lead, autonomous, resident, args.get("worker_pool_id"))
        definition_id = args.get("agent_definition_id")
        async with self._spawn_lock:
            mates = await self.store.of_lead(lead_sid)
            active = [m for m in mates if m.state == "active"]
            if len(active) >= self.max_teammates:
                raise AgentCoreError(
                    ErrorCode.child_agent_limit_exceeded,
                    f"session {lead_sid} already has {len(active)} active teammate(s) "
                    f"([agents] max_teammates_per_session = {self.max_teammates}); stop one with a "
                    "shutdown request or raise the limit",
                    details={"limit": "agents.max_teammates_per_session", "value": self.max_teammates},
                )
            if any(m.name == name for m in active):
                raise _invalid(f"the team already has an active teammate named {name!r}", teammate=name)
            prepared = await self.profiles.prepare(definition_id, isolation, name)
            session = await self.manager.new_session(
                RunMode.normal,
                metadata={"team": {"lead_session_id": lead_sid, "name": name}},
                agent_metadata={"name": name, "purpose": "teammate", "lead_session_id": lead_sid},
            )
            now = format_ts()
            record = TeammateRecord(
                session_id=session.session_id,
                agent_id=session.root_agent_id,
                lead_session_id=lead_sid,
                lead_agent_id=lead.root_agent_id,
                name=name,
                state="active",
                settings={
                    "resident": resident,
                    "isolation": isolation,
                    "autonomous": autonomous,
                    "worker_pool_id": pool,
                    "agent_definition_id": definition_id,
                    "task": self.manager.services.redactor.text(task[:500]),
                    **prepared.settings(),
                },
                created_at=now,
                updated_at=now,
            )
            await self.store.insert(record)
        self.remember(record)
        session.profile = self.profiles.build(record, prepared)
        await ctx.sink.emit(
            ev.TeammateSpawned(
                name=name,
                teammate_agent_id=record.agent_id,
                teammate_session_id=record.session_id,
                resident=resident,
                isolation=isolation,
                autonomous=autonomous,
            ),
            tool_call_id=ctx.tool_call_id,
        )
        delivery = await self.inbox.deliver(
            record.session_id,
            None,
            {"kind": "message", "from": LEAD, "content": task, "metadata": {"task": True}},
        )
        return {
            "name": name,
            "agent_id": record.agent_id,
            "session_id": record.session_id,
            "resident": resident,
            "isolation": isolation,
            "autonomous": autonomous,
            **({"branch": prepared.branch} if prepared.branch else {}),
            "run_id": delivery.run_id if delivery is not None else None,
            "state": "working",
        }

    # ---- messages and requests --------------------------------------------------------------------
    async def send(self, ctx: ToolContext, to: str, content: str) -> dict[str, Any]:
        lead_sid, me = await self._lead_of(ctx)
        session_id, agent_id, name = await self._address(lead_sid, to, me)
        entry = {"kind": "message", "from": me, "content": content, "metadata": {"team": lead_sid}}
        delivery = await self.inbox.deliver(session_id, agent_id, entry)
        assert delivery is not None
        return {
            "to": name,
            "entry_id": delivery.entry.entry_id,
            "inbox_depth": delivery.depth,
            "woke": delivery.woke,
        }

    async def request(
        self, ctx: ToolContext, to: str, kind: str, content: str
    ) -> dict[str, Any] | StoredEntry:
        """Sends a request; a plan approval's answer (the stored ``response`` entry) once it arrived."""
        if kind not in REQUEST_KINDS:
            raise _invalid(f"kind must be one of {', '.join(REQUEST_KINDS)}, got {kind!r}")
        lead_sid, me = await self._lead_of(ctx)
        if kind == "plan_approval" and (me == LEAD or to != LEAD):
            raise _invalid('a plan_approval request goes from a teammate to its lead (to="lead")')
        if kind == "shutdown" and (me != LEAD or to == LEAD):
            raise _invalid("a shutdown request goes from the lead to one of its teammates")
        session_id, agent_id, name = await self._address(lead_sid, to, me)
        request_id = new_id("req_")
        redactor = self.manager.services.redactor
        record = RequestRecord(
            request_id=request_id,
            kind=kind,
            lead_session_id=lead_sid,
            from_session_id=ctx.session_id,
            from_agent_id=ctx.agent_id,
            from_name=me,
            to_session_id=session_id,
            to_agent_id=agent_id,
            to_name=name,
            content=redactor.text(content),
            status="pending",
            created_at=format_ts(),
        )
        entry = {
            "kind": "request",
            "from": me,
            "content": content,
            "request_id": request_id,
            "metadata": {"request_kind": kind, "team": lead_sid},
        }
        await self.inbox.deliver(session_id, agent_id, entry, guard=insert_request_guard(record))
        if kind == "shutdown":
            return {"request_id": request_id, "to": name, "kind": kind, "status": "pending"}

        def answer_or_shutdown(stored: StoredEntry) -> bool:
            entry = stored.entry
            if entry.kind == "response" and entry.request_id == request_id:
                return True
            return entry.kind == "request" and entry.metadata.get("request_kind") == "shutdown"

        found = await self.inbox.wait_for(
            ctx.session_id, ctx.agent_id, answer_or_shutdown, ctx.scope.cancel_event
        )
        if found is None:
            raise AgentCoreError(
                ErrorCode.cancelled, f"stopped waiting for the answer to request {request_id}"
            )
        return found

    async def respond(
        self, ctx: ToolContext, request_id: str, approve: bool, reason: str | None
    ) -> dict[str, Any]:
        request = await self.store.request(request_id)
        if request is None or (request.to_session_id, request.to_agent_id) != (ctx.session_id, ctx.agent_id):
            raise _invalid(f"no request {request_id!r} addressed to you", request_id=request_id)
        if request.status != "pending":
            raise _invalid(
                f"request {request_id} was answered already ({request.status})", request_id=request_id
            )
        if not await self.answer(request, approve, reason):
            raise _invalid(f"request {request_id} was answered already", request_id=request_id)
        return {"request_id": request_id, "approved": approve, "to": request.from_name}

    async def answer(self, request: RequestRecord, approve: bool, reason: str | None) -> bool:
        """Answers ``request`` into its requester's inbox (``False``: it was answered already)."""
        text = reason or ("approved" if approve else "rejected")
        entry = {
            "kind": "response",
            "from": request.to_name,
            "content": text,
            "request_id": request.request_id,
            "metadata": {"request_kind": request.kind, "approve": approve, "team": request.lead_session_id},
        }
        redacted = self.manager.services.redactor.text(reason) if reason else None
        delivered = await self.inbox.deliver(
            request.from_session_id,
            request.from_agent_id,
            entry,
            guard=answer_guard(request.request_id, approve, redacted),
        )
        return delivered is not None

    # ---- listing ----------------------------------------------------------------------------------
    async def views(self, session_id: str) -> list[TeammateView]:
        """The team of ``session_id`` (a lead's session, or a teammate's: its lead's team)."""
        me = await self.member(session_id)
        lead_sid = me.lead_session_id if me is not None else session_id
        storage = self.manager.services.storage
        out: list[TeammateView] = []
        for mate in await self.store.of_lead(lead_sid):
            depth = (await storage.inbox_depths(mate.session_id)).get(mate.agent_id, 0)
            out.append(
                TeammateView(
                    name=mate.name,
                    agent_id=mate.agent_id,
                    session_id=mate.session_id,
                    state=self.state_of(mate),
                    inbox_depth=depth,
                    resident=bool(mate.setting("resident", True)),
                    isolation=mate.setting("isolation", "shared"),
                    autonomous=bool(mate.setting("autonomous", False)),
                    agent_definition_id=mate.setting("agent_definition_id"),
                    worker_pool_id=mate.setting("worker_pool_id"),
                    branch=mate.setting("branch"),
                    stopped_reason=mate.setting("stopped_reason"),
                    lead_session_id=lead_sid,
                    created_at=parse_ts(mate.created_at),
                )
            )
        return out

    def state_of(self, mate: TeammateRecord) -> str:
        if mate.state == "stopped":
            return "stopped"
        session = self.manager.sessions.get(mate.session_id)
        return "working" if session is not None and session.busy else "idle"

    # ---- runs -------------------------------------------------------------------------------------
    async def on_session_loaded(self, session: SessionState) -> None:
        record = await self.member(session.session_id)
        if record is not None:
            session.profile = await self.profiles.restore(record)

    async def on_drained(self, state: RunState, entries: Sequence[InboxEntry]) -> LoopOutcome | None:
        """A teammate read a shutdown request: it answers, stops, and its run ends here."""
        requests = [
            e for e in entries if e.kind == "request" and e.metadata.get("request_kind") == "shutdown"
        ]
        record = await self.member(state.session_id)
        if not requests or record is None:
            return None
        for entry in requests:
            request = await self.store.request(entry.request_id or "")
            if request is None or request.status != "pending":
                continue
            try:
                await self.answer(request, True, f"{record.name} finished its current step and stopped")
            except AgentCoreError as exc:  # the lead's inbox is full: it stops anyway (team_list shows it)
                log.warning(
                    "teammate %s could not answer shutdown %s: %s",
                    record.name,
                    request.request_id,
                    exc.message,
                )
        await self.stop(record, "shut down at its lead's request")
        return LoopOutcome(RunStatus.completed, EndReason.completed)

    async def after_root_run(self, session: SessionState, state: RunState) -> None:
        record = await self.member(session.session_id)
        if record is None or record.state == "stopped":
            return
        await self.profiles.commit_worktree(session)
        if not record.setting("resident", True):
            outcome = state.outcome
            text = outcome.final_text if outcome is not None and outcome.final_text else ""
            if state.status != RunStatus.completed:
                error = state.error.message if state.error is not None else state.status.value
                text = f"[{state.status.value}] {error}\n{text}".strip()
            entry = {
                "kind": "message",
                "from": record.name,
                "content": text or "(no answer)",
                "metadata": {"final": True, "status": state.status.value, "team": record.lead_session_id},
            }
            try:
                await self.inbox.deliver(record.lead_session_id, record.lead_agent_id, entry)
            except AgentCoreError as exc:
                log.warning("teammate %s could not report to its lead: %s", record.name, exc.message)
            await self.stop(record, "finished its task")
            return
        if record.setting("autonomous", False):
            await self.autonomy.scan(record.lead_session_id)

    async def stop(self, record: TeammateRecord, reason: str) -> None:
        if not await self.store.stop(record.session_id, reason):
            return
        stopped = record.model_copy(
            update={"state": "stopped", "settings": {**record.settings, "stopped_reason": reason}}
        )
        self.remember(stopped)
        session = self.manager.sessions.get(record.session_id)
        if session is not None and session.profile is not None:
            session.profile.closed = (
                f"teammate {record.name!r} has stopped ({reason}); its inbox takes no more entries"
            )
        event = ev.TeammateStopped(
            name=record.name,
            teammate_agent_id=record.agent_id,
            teammate_session_id=record.session_id,
            reason=reason,
        )
        lead = self.manager.sessions.get(record.lead_session_id)
        active = lead.active if lead is not None else None
        try:
            if active is not None and not active.terminal:
                await active.recorder.emit(event)
            else:
                draft = EventDraft.of(event, agent_id=record.lead_agent_id, run_id=None, created_at=utc_now())
                await self.manager.services.storage.append(record.lead_session_id, events=[draft])
        except AgentCoreError:
            log.warning("could not record that teammate %s stopped", record.name, exc_info=True)

    # ---- the live feed of teammates' events (chat, serve) -----------------------------------------
    def observe(self, event: RuntimeEvent) -> None:
        """An event observer: events of teammates' runs go to the feeds of their lead's session, and so
        do the lead's own runs its inbox woke (as ``"lead"``: nobody else shows them)."""
        mate = self._members.get(event.session_id)
        if mate is not None:
            lead, name, agent_id = mate.lead_session_id, mate.name, mate.agent_id
        else:
            state = self.manager.runs.get(event.run_id) if event.run_id else None
            woken = state is not None and state.parent is None and state.message is None
            if not woken or not self._feeds.get(event.session_id):
                return
            lead, name, agent_id = event.session_id, LEAD, event.agent_id or ""
        feeds = self._feeds.get(lead)
        if not feeds:
            return
        item = TeamEvent(name=name, agent_id=agent_id, session_id=event.session_id, event=event)
        for queue in feeds:
            if queue.qsize() < FEED_CAPACITY:
                queue.put_nowait(item)

    async def watch(self, lead_session_id: str) -> AsyncIterator[TeamEvent]:
        """The feed of one lead session until the caller stops or the runtime closes."""
        queue: asyncio.Queue[TeamEvent | None] = asyncio.Queue()
        self._feeds.setdefault(lead_session_id, []).append(queue)
        try:
            while (item := await queue.get()) is not None:
                yield item
        finally:
            feeds = self._feeds.get(lead_session_id, [])
            if queue in feeds:
                feeds.remove(queue)

    async def close(self) -> None:
        for feeds in self._feeds.values():
            for queue in feeds:
                queue.put_nowait(None)  # ends the watchers
        await self.autonomy.close()
