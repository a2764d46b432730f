"""The channel hub: chat conversations in front of the session inbox (``docs/channels.md``).

Contract:

- **Inbound.** An allowed message (the channel already dropped strangers) goes to the session mapped to
  its conversation (per chat, or per thread with ``session_scope = "thread"``; a new session is created
  with ``AgentRuntime.create_session`` and the map is saved at once) as a ``channel`` inbox entry:
  ``runtime.deliver(session_id, None, entry, wake=True)``, ``from`` = ``<channel>:<user name or id>``,
  ``metadata`` = channel, chat, thread, user and message ids. A live run of the session reads it before
  its next model step; an idle session is woken with a run. A session that no longer exists (deleted)
  is replaced by a new one; any other refusal (inbox full) is told to the chat in one line.
- **Commands.** ``/new`` maps the conversation to a new session; ``/start`` and ``/help`` answer with one
  help line. Neither reaches the agent.
- **Runs.** Every run that will read a delivered entry is followed once: while it works the conversation
  shows the typing state (refreshed every few seconds), and when it ends its final answer (the root
  agent's last message without tool calls) is sent to the conversation, a failed run as one line with
  its error, a cancelled one as ``(cancelled)``. When entries were left unread by that run (they arrived
  after its last model step) the wake-up run that follows is found in the session and followed too.
- **Approvals.** :meth:`ChannelHub.ask` posts a permission request of a channel session to its
  conversation as a question with three buttons (allow once, allow for this session, deny); a press by
  an allowed user answers it through ``answer`` (``AgentRuntime.answer_permission``, or the server's
  approval broker inside ``serve``), and the question is edited to show who answered what. A press on a
  request that is no longer pending (answered elsewhere, its run ended) only edits the question.
- **MCP elicitation.** A server's question (``metadata.mcp_request == "elicitation"``) is posted as the
  server's text: with form fields the conversation's next message is the answer (one field: the text;
  several: ``name: value`` lines; a message that does not fit is told why and does not reach the
  agent), plus a Decline button; URL mode and field-less questions get Done/Accept and Decline.
- **The model's questions.** :meth:`ChannelHub.ask_user` posts an ``internal.ask_user`` question with its
  options as buttons; a press or the conversation's next message answers it (``answer_question``).
- **Ownership.** :meth:`run` owns every task it creates (the channels' receive loops and the run
  followers) in one task group; cancelling it stops them all and closes the channels.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core.adapters.channels._sessions import SessionMap
from agent_core.adapters.channels._types import (
    Channel,
    ChatAddress,
    Choice,
    ChoiceAnswer,
    InboundMessage,
    OutboundMessage,
    Sent,
)
from agent_core.elicitation import form_fields, kind_of, parse_reply
from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError
from agent_core.types import events as ev
from agent_core.types.enums import RunStatus
from agent_core.types.inbox import InboxEntry
from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion

if TYPE_CHECKING:
    from agent_core import AgentRuntime, RunHandle

log = logging.getLogger("agent_core.adapters.channels")

Answer = Callable[[str, PermissionDecision], Awaitable[object]]
"""Answers a deferred permission request: ``AgentRuntime.answer_permission`` (returns ``None``, raises
``validation_error`` when not pending) or the server's broker (returns ``"answered"`` or why not)."""

AnswerQuestion = Callable[[str, str], Awaitable[object]]
"""Answers a deferred ``internal.ask_user`` question: ``AgentRuntime.answer_question`` or the server's
question broker (returns ``"answered"`` or why not)."""

TYPING_REFRESH_S = 4.0
"""Telegram shows ``typing`` for 5 s after each ``sendChatAction``."""
FOLLOW_UP_WAIT_S = 10.0
"""How long to look for the wake-up run that reads entries a finished run left unread."""
COMMANDS = frozenset({"/new", "/start", "/help"})
"""Handled by the hub itself (never sent to the agent): a new session, and a short help line."""
_DECISIONS = {"o": "allow_once", "s": "allow_for_session", "d": "deny", "a": "allow_once"}
_SHOWN = {"allow_once": "allowed once", "allow_for_session": "allowed for this session", "deny": "denied"}
_SHOWN_FORM = {"allow_once": "answered", "deny": "declined"}


@dataclass(slots=True)
class _Conversation:
    channel: Channel
    address: ChatAddress
    reply_to: str | None = None
    pending_entries: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Question:
    request_id: str
    channel: str
    address: ChatAddress
    sent: Sent | None
    """The posted question; ``None`` while it is being posted (a press may arrive before the platform's
    answer to the post does)."""
    text: str
    form: dict[str, Any] | None = None
    """An elicitation's ``requested_schema`` (answered by a message, :func:`parse_reply`)."""
    elicitation: bool = False
    options: tuple[str, ...] | None = None
    """An ``internal.ask_user`` question's suggested answers (its buttons); any reply answers it too."""
    outcome: str = ""


def _address_of(key: str) -> ChatAddress:
    chat, _, thread = key.partition("/")
    return ChatAddress(chat, thread or None)


def question_text(request: PermissionRequest) -> str:
    """The approval question as plain text (the platforms escape it)."""
    lines = [f"Permission needed: {request.tool_name} ({request.permission})"]
    if request.args_summary:
        lines.append(request.args_summary[:1500])
    if request.target_scope:
        lines.append(f"target: {request.target_scope}")
    if request.network_host:
        lines.append(f"network: {request.network_host}")
    if request.dangerous:
        lines.append("marked dangerous")
    return "\n".join(lines)


def elicitation_question(
    request: PermissionRequest, token: str
) -> tuple[str, list[Choice], dict[str, Any] | None]:
    """An MCP server's elicitation as a chat question: its text, its buttons and, when the conversation's
    next message is the answer, the form's schema."""
    meta = request.metadata
    lines = [f"MCP server {meta.get('server_id', '?')} asks: {meta.get('message', '')}"]
    decline = Choice("Decline", f"{token}:d")
    if meta.get("url"):
        lines.append(f"Open: {meta['url']}")
        return "\n".join(lines), [Choice("Done", f"{token}:a"), decline], None
    schema = meta.get("requested_schema") or {}
    fields = form_fields(schema)
    if not fields:
        return "\n".join(lines), [Choice("Accept", f"{token}:a"), decline], None
    if len(fields) == 1:
        name, spec, required = fields[0]
        lines.append(f"Reply with the {name} ({kind_of(spec)}{', required' if required else ''}).")
    else:
        lines.append("Reply with one line per field:")
        for name, spec, required in fields:
            hint = f"  {spec['description']}" if spec.get("description") else ""
            lines.append(f"{name}: <{kind_of(spec)}{'' if required else ', optional'}>{hint}")
    return "\n".join(lines), [decline], schema


class ChannelHub:
    """Routes chat conversations of ``channels`` to sessions of ``runtime`` (see the module docstring)."""

    def __init__(
        self,
        runtime: AgentRuntime,
        channels: Sequence[Channel],
        *,
        home: Path | None = None,
        answer: Answer | None = None,
        answer_question: AnswerQuestion | None = None,
    ) -> None:
        self._runtime = runtime
        self._channels = {c.name: c for c in channels}
        folder = home if home is not None else runtime.home_dir
        self._maps = {c.name: SessionMap(folder, c.name) for c in channels}
        self._answer: Answer = answer if answer is not None else runtime.answer_permission
        self._answer_question: AnswerQuestion = (
            answer_question if answer_question is not None else runtime.answer_question
        )
        self._conversations: dict[str, _Conversation] = {}
        """session_id -> the conversation it answers (the latest message's)."""
        self._followed: set[str] = set()
        self._questions: dict[str, _Question] = {}
        self._forms: dict[tuple[str, str], str] = {}
        """(channel, conversation key) -> the token of the elicitation form its next message answers."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._group: asyncio.TaskGroup | None = None
        self._followers: set[asyncio.Task[None]] = set()
        self._ready = asyncio.Event()
        self.failures: dict[str, str] = {}
        """Channel name -> why it stopped (a revoked token, a port in use, ...)."""

    @property
    def channels(self) -> list[Channel]:
        return list(self._channels.values())

    def session_for(self, channel: str, address: ChatAddress) -> str | None:
        """The session mapped to a conversation, if any."""
        chan = self._channels[channel]
        return self._maps[channel].get(address.key(chan.session_scope))

    # ---- lifecycle -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Receives on every channel until cancelled, or until every channel stopped on an error (each
        one's reason is in :attr:`failures`); closes the channels on the way out."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                receivers = [
                    group.create_task(self._receive(channel), name=f"channel-{channel.name}")
                    for channel in self._channels.values()
                ]
                self._ready.set()
                await asyncio.gather(*receivers)
                for task in list(self._followers):  # every channel stopped: nothing left to answer
                    task.cancel()
        finally:
            self._group = None
            for channel in self._channels.values():
                with contextlib.suppress(Exception):
                    await channel.aclose()

    async def _receive(self, channel: Channel) -> None:
        try:
            await channel.serve(self)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = str(exc) or type(exc).__name__
            self.failures[channel.name] = reason
            log.error("channel %s stopped: %s", channel.name, reason)

    async def started(self) -> None:
        """Returns once :meth:`run` has started the channels' receive loops."""
        await self._ready.wait()

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        if self._group is None:
            raise InvalidArgumentError(ErrorCode.validation_error, "the channel hub is not running")
        task = self._group.create_task(self._guarded(coro, name), name=name)
        self._followers.add(task)
        task.add_done_callback(self._followers.discard)

    @staticmethod
    async def _guarded(coro: Awaitable[None], name: str) -> None:
        """One failing follower never takes the hub (and the other conversations) down."""
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("channel task %s failed", name)

    # ---- inbound ---------------------------------------------------------------------------------

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    async def _session(self, channel: Channel, key: str, *, fresh: bool = False) -> str:
        smap = self._maps[channel.name]
        async with self._lock(f"{channel.name}|{key}"):
            session_id = None if fresh else smap.get(key)
            if session_id is None:
                session_id = await self._runtime.create_session()
                smap.put(key, session_id)
                log.info("channel %s: conversation %s -> new session %s", channel.name, key, session_id)
            return session_id

    async def on_message(self, message: InboundMessage) -> None:
        channel = self._channels[message.channel]
        key = message.address.key(channel.session_scope)
        command = message.text.strip().split("@", 1)[0].lower()
        if command in COMMANDS:
            await self._command(channel, key, message, command)
            return
        if await self._form_answer(channel, key, message):
            return
        entry = InboxEntry(
            kind="channel",
            from_=f"{channel.name}:{message.user_name or message.user_id}"[:200],
            content=message.text,
            metadata={
                "channel": channel.name,
                "chat_id": message.address.chat_id,
                "thread_id": message.address.thread_id,
                "user_id": message.user_id,
                "message_id": message.message_id,
            },
        )
        session_id = await self._session(channel, key)
        try:
            delivery = await self._runtime.deliver(session_id, None, entry, wake=True)
        except AgentCoreError as exc:
            if not await self._session_missing(session_id):
                await self._tell(channel, message.address, f"Could not take the message: {exc.message}")
                return
            session_id = await self._session(channel, key, fresh=True)
            delivery = await self._runtime.deliver(session_id, None, entry, wake=True)
        conversation = self._conversations.get(session_id)
        if conversation is None or conversation.address != message.address:
            conversation = _Conversation(channel, message.address)
            self._conversations[session_id] = conversation
        conversation.reply_to = message.message_id
        if delivery.entry.entry_id:
            conversation.pending_entries.add(delivery.entry.entry_id)
        if delivery.run_id is not None:
            self._follow(delivery.run_id, session_id)

    async def _command(self, channel: Channel, key: str, message: InboundMessage, command: str) -> None:
        if command == "/new":
            session_id = await self._session(channel, key, fresh=True)
            text = f"Started a new session ({session_id}); the next message goes to it."
        else:  # /start, /help
            text = (
                f"soong-agent on {self._runtime.project_dir.name}: write a message and the agent answers "
                "here; /new starts a new session for this conversation."
            )
        await self._tell(channel, message.address, text)

    async def _session_missing(self, session_id: str) -> bool:
        try:
            await self._runtime.replay_session(session_id, from_seq=0, to_seq=0)
        except AgentCoreError as exc:
            return exc.code == ErrorCode.validation_error
        return False

    async def _tell(self, channel: Channel, address: ChatAddress, text: str) -> None:
        try:
            await channel.send(OutboundMessage(address, text))
        except Exception:
            log.warning("channel %s: could not send to %s", channel.name, address.chat_id, exc_info=True)

    # ---- following runs --------------------------------------------------------------------------

    def _follow(self, run_id: str, session_id: str) -> None:
        if run_id in self._followed:
            return
        self._followed.add(run_id)
        self._spawn(self._follow_run(run_id, session_id), f"channel-run-{run_id}")

    async def _typing(self, conversation: _Conversation, stop: asyncio.Event) -> None:
        channel = conversation.channel
        while not stop.is_set():
            try:
                await channel.typing(conversation.address, True, conversation.reply_to)
            except Exception:
                log.debug("channel %s: typing state failed", channel.name, exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TYPING_REFRESH_S)

    async def _follow_run(self, run_id: str, session_id: str) -> None:
        try:
            handle = self._runtime.run_handle(run_id)
        except AgentCoreError:
            return
        conversation = self._conversations[session_id]
        stop = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            group.create_task(self._typing(conversation, stop))
            try:
                answer, drained = await self._watch(handle)
            finally:
                stop.set()
        with contextlib.suppress(Exception):
            await conversation.channel.typing(conversation.address, False, conversation.reply_to)
        conversation.pending_entries -= drained
        await self._reply(handle, conversation, answer)
        if conversation.pending_entries:
            await self._follow_next(session_id)

    async def _watch(self, handle: RunHandle) -> tuple[str | None, set[str]]:
        """The run's final answer and the inbox entries it read (from its live events, or from its
        record when another consumer holds the live stream)."""
        answer: str | None = None
        drained: set[str] = set()
        events: list[Any] = []
        try:
            async for event in handle.events():
                events.append(event)
        except AgentCoreError:  # the live stream has another consumer: read the record after the end
            await handle.wait()
            events = (await self._runtime.replay_run(handle.run_id)).events
        await handle.wait()
        for event in events:
            match event.payload:
                case ev.InboxDrained(entry_ids=ids):
                    drained.update(str(e) for e in ids or ())
                case ev.MessageCompleted(has_tool_calls=calls, text=text) if (
                    not calls and event.agent_id in (None, handle.agent_id) and (text or "").strip()
                ):
                    answer = text
        return answer, drained

    async def _reply(self, handle: RunHandle, conversation: _Conversation, answer: str | None) -> None:
        status = handle.status
        if status == RunStatus.completed and answer:
            text = answer
        elif status == RunStatus.failed:
            error = handle.error
            text = f"The run failed: {error.message if error else 'unknown error'}"
        elif status == RunStatus.cancelled:
            text = "(cancelled)"
        else:
            return  # a wake-up run that found nothing to read: nothing to say
        await self._tell_reply(conversation, text)

    async def _tell_reply(self, conversation: _Conversation, text: str) -> None:
        message = OutboundMessage(conversation.address, text, reply_to=conversation.reply_to)
        try:
            await conversation.channel.send(message)
        except Exception:
            log.warning(
                "channel %s: could not send the answer to %s",
                conversation.channel.name,
                conversation.address.chat_id,
                exc_info=True,
            )

    async def _follow_next(self, session_id: str) -> None:
        """Finds the wake-up run that reads what the last followed run left unread, and follows it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FOLLOW_UP_WAIT_S
        while loop.time() < deadline:
            replay = await self._runtime.replay_session(session_id)
            for run in replay.runs:
                if run.parent_run_id is None and run.run_id not in self._followed and not run.status.terminal:
                    self._follow(run.run_id, session_id)
                    return
            await asyncio.sleep(0.2)

    # ---- approvals -------------------------------------------------------------------------------

    def conversation_of(self, session_id: str) -> tuple[Channel, ChatAddress] | None:
        """The channel conversation a session answers, when it is a channel session."""
        conversation = self._conversations.get(session_id)
        if conversation is not None:
            return conversation.channel, conversation.address
        for name, smap in self._maps.items():
            keys = smap.keys_for(session_id)
            if keys:
                return self._channels[name], _address_of(keys[-1])
        return None

    async def ask(self, request: PermissionRequest) -> bool:
        """Posts ``request`` to its session's conversation as a choice; ``False`` when the session is not
        a channel session (or the question could not be sent): someone else must answer it.

        An MCP elicitation request is posted as the server's question: with form fields the
        conversation's next message answers it (:func:`parse_reply`; a message that does not fit is told
        why and the question stays), with a Decline button; in URL mode (or without fields) Done/Accept
        and Decline buttons."""
        target = self.conversation_of(request.session_id)
        if target is None:
            return False
        channel, address = target
        token = secrets.token_hex(6)
        form: dict[str, Any] | None = None
        elicitation = request.metadata.get("mcp_request") == "elicitation"
        if elicitation:
            text, choices, form = elicitation_question(request, token)
        else:
            text = question_text(request)
            choices = [Choice("Allow once", f"{token}:o")]
            if request.suggested_decision != "deny":
                choices.append(Choice("Allow for session", f"{token}:s"))
            choices.append(Choice("Deny", f"{token}:d"))
        question = _Question(request.request_id, channel.name, address, None, text, form, elicitation)
        self._questions[token] = question  # before posting: a press may come back before the post does
        if form is not None:
            self._forms[(channel.name, address.key(channel.session_scope))] = token
        try:
            sent = await channel.send(OutboundMessage(address, text, tuple(choices)))
        except Exception:
            log.warning("channel %s: could not post a permission request", channel.name, exc_info=True)
            self._forget(token)
            return False
        if token in self._questions:
            question.sent = sent
        else:  # answered while it was being posted: show how
            with contextlib.suppress(Exception):
                await channel.edit(sent, f"{text}\n→ {question.outcome}")
        return True

    async def ask_user(self, question: UserQuestion) -> bool:
        """Posts the model's ``internal.ask_user`` question to its session's conversation: its options as
        buttons, and the conversation's next message answers it too; ``False`` when the session is not a
        channel session (or the question could not be sent)."""
        target = self.conversation_of(question.session_id)
        if target is None:
            return False
        channel, address = target
        token = secrets.token_hex(6)
        options = tuple(question.options[:10])
        hint = "Press an answer or reply with a message." if options else "Reply with a message."
        text = f"The agent asks: {question.question}\n{hint}"
        choices = tuple(Choice(option[:70], f"{token}:q{i}") for i, option in enumerate(options))
        pending = _Question(question.request_id, channel.name, address, None, text, options=options)
        self._questions[token] = pending
        place = (channel.name, address.key(channel.session_scope))
        self._forms[place] = token
        try:
            sent = await channel.send(OutboundMessage(address, text, choices))
        except Exception:
            log.warning("channel %s: could not post a question", channel.name, exc_info=True)
            self._forget(token)
            return False
        if token in self._questions:
            pending.sent = sent
        else:
            with contextlib.suppress(Exception):
                await channel.edit(sent, f"{text}\n→ {pending.outcome}")
        return True

    async def on_choice(self, answer: ChoiceAnswer) -> str:
        token, _, code = answer.value.partition(":")
        question = self._questions.get(token)
        if question is not None and question.options is not None and code[:1] == "q" and code[1:].isdigit():
            index = int(code[1:])
            same = question.channel == answer.channel and question.address.chat_id == answer.address.chat_id
            if index < len(question.options) and same:
                _, ack = await self._settle_answer(token, question, question.options[index], answer.user_id)
                return ack
        decision = _DECISIONS.get(code)
        if question is None or decision is None or question.options is not None:
            return "This request is no longer pending."
        if question.channel != answer.channel or question.address.chat_id != answer.address.chat_id:
            return "This request belongs to another conversation."
        _, ack = await self._settle(token, question, decision, answer.user_id)
        return ack

    def _forget(self, token: str) -> None:
        self._questions.pop(token, None)
        for place, pending in list(self._forms.items()):
            if pending == token:
                del self._forms[place]

    async def _settle_answer(self, token: str, question: _Question, text: str, who: str) -> tuple[bool, str]:
        """Answers an ``internal.ask_user`` question with ``text``; ``(answered, acknowledgement)``."""
        self._forget(token)
        try:
            result = await self._answer_question(question.request_id, text)
        except AgentCoreError:
            result = "missing"
        answered = result is None or result == "answered"
        shown = text if len(text) <= 200 else text[:199] + "…"
        question.outcome = f"answered by {who}: {shown}" if answered else "no longer pending"
        if question.sent is not None:
            with contextlib.suppress(Exception):
                await self._channels[question.channel].edit(
                    question.sent, f"{question.text}\n→ {question.outcome}"
                )
        return answered, "Answered." if answered else "This request is no longer pending."

    async def _form_answer(self, channel: Channel, key: str, message: InboundMessage) -> bool:
        """Answers the conversation's pending elicitation form with ``message``; ``False`` when there is
        none (or it is no longer pending): the message goes to the agent."""
        token = self._forms.get((channel.name, key))
        question = self._questions.get(token) if token is not None else None
        if token is not None and question is not None and question.options is not None:
            if not message.text.strip():
                return True
            answered, _ = await self._settle_answer(token, question, message.text.strip(), message.user_id)
            return answered
        if token is None or question is None or question.form is None:
            self._forms.pop((channel.name, key), None)
            return False
        try:
            content = parse_reply(message.text, question.form)
        except ValueError as exc:
            await self._tell(
                channel, message.address, f"Not an answer: {exc}. Reply again, or press Decline."
            )
            return True
        answered, _ = await self._settle(token, question, "allow_once", message.user_id, content)
        return answered

    async def _settle(
        self, token: str, question: _Question, decision: str, who: str, content: dict[str, Any] | None = None
    ) -> tuple[bool, str]:
        """Answers ``question``, edits it to say how; ``(answered, acknowledgement)``."""
        self._forget(token)
        channel = self._channels[question.channel]
        metadata: dict[str, Any] = {"channel": channel.name, "user_id": who}
        if content is not None:
            metadata["content"] = content
        verdict = PermissionDecision.model_validate({"decision": decision, "metadata": metadata})
        try:
            result = await self._answer(question.request_id, verdict)
        except AgentCoreError:
            result = "missing"
        shown = (_SHOWN_FORM if question.elicitation else _SHOWN)[decision]
        answered = result is None or result == "answered"
        if answered:
            outcome, ack = f"{shown} by {who}", shown.capitalize() + "."
        else:  # the server broker's conflict / missing outcomes: someone else answered, or it expired
            outcome, ack = "no longer pending", "This request is no longer pending."
        question.outcome = outcome
        if question.sent is not None:
            with contextlib.suppress(Exception):
                await channel.edit(question.sent, f"{question.text}\n→ {outcome}")
        return answered, ack
