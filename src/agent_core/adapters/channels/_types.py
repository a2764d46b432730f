"""What a chat channel exchanges with the hub: platform-neutral inbound and outbound messages.

A :class:`Channel` adapter turns a platform's updates into :class:`InboundMessage` (a user's text) and
:class:`ChoiceAnswer` (a pressed button of an interactive choice), hands them to the hub's
:class:`ChannelEvents`, and sends the hub's :class:`OutboundMessage` (an answer, or a question with
:class:`Choice` buttons) back to the platform. Conversations are addressed by :class:`ChatAddress`:
a chat and, where the platform has them, a thread (a Slack thread, a Telegram forum topic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class ChatAddress:
    """Where a conversation lives: ``chat_id`` and, when the platform threads it, ``thread_id``."""

    chat_id: str
    thread_id: str | None = None

    def key(self, scope: str) -> str:
        """The session-map key: per chat, or per thread of a chat (``session_scope``)."""
        if scope == "thread" and self.thread_id:
            return f"{self.chat_id}/{self.thread_id}"
        return self.chat_id


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A user's message on a platform (DeerFlow's ``InboundMessage``)."""

    channel: str
    address: ChatAddress
    user_id: str
    text: str
    user_name: str = ""
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    """One button of an interactive choice: its label and the opaque value sent back when pressed."""

    label: str
    value: str


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """What the hub sends to a conversation (DeerFlow's ``OutboundMessage``): text, optionally with
    buttons; ``reply_to`` is the platform id of the message it answers, when known."""

    address: ChatAddress
    text: str
    choices: tuple[Choice, ...] = ()
    reply_to: str | None = None


@dataclass(frozen=True, slots=True)
class ChoiceAnswer:
    """A pressed button: who pressed it, where, and the :class:`Choice` value it carried."""

    channel: str
    address: ChatAddress
    user_id: str
    value: str
    message_id: str | None = None
    """The platform id of the message that carried the buttons (edited once answered)."""
    platform_ref: str | None = None
    """The platform's id of the press (Telegram ``callback_query`` id), for the acknowledgement."""


@dataclass(frozen=True, slots=True)
class Sent:
    """A sent message: its platform id (for edits) and where it went."""

    address: ChatAddress
    message_id: str


@dataclass(slots=True)
class Filtered:
    """Counters of updates a channel dropped (strangers, bots, edits): visible in logs and tests."""

    not_allowed: int = 0
    ignored: int = 0
    bad_signature: int = 0
    details: list[str] = field(default_factory=list)


class ChannelEvents(Protocol):
    """What a channel calls on the hub."""

    async def on_message(self, message: InboundMessage) -> None: ...

    async def on_choice(self, answer: ChoiceAnswer) -> str:
        """Handles a pressed button; returns the short acknowledgement shown to the presser."""
        ...


@runtime_checkable
class Channel(Protocol):
    """A chat platform adapter.

    ``serve(events)`` receives updates until cancelled (long polling, an HTTP endpoint) and calls
    ``events`` for every allowed message and button press; strangers never reach it. The other methods
    talk back. Implementations check ``allowed_chats`` / ``allowed_users`` themselves (:func:`allowed`).
    """

    name: str
    kind: str
    session_scope: str

    async def serve(self, events: ChannelEvents) -> None: ...

    async def send(self, message: OutboundMessage) -> Sent: ...

    async def edit(self, sent: Sent, text: str) -> None:
        """Replaces a sent message's text and removes its buttons."""
        ...

    async def typing(self, address: ChatAddress, active: bool, message_id: str | None = None) -> None:
        """Shows (or clears) the "working" state in the conversation."""
        ...

    async def aclose(self) -> None: ...


def allowed(chat_id: str, user_id: str, allowed_chats: frozenset[str], allowed_users: frozenset[str]) -> bool:
    """A message is taken when its chat is allowed (or no chat list is set) and its sender is allowed (or
    no user list is set); with both lists empty nothing is taken (the configuration refuses that)."""
    if not allowed_chats and not allowed_users:
        return False
    if allowed_chats and chat_id not in allowed_chats:
        return False
    return not (allowed_users and user_id not in allowed_users)
