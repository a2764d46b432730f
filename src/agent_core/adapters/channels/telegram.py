"""Telegram: the Bot API over long polling (``getUpdates``), with plain httpx.

Why httpx and not ``python-telegram-bot``: the adapter needs six Bot API methods (``getUpdates``,
``sendMessage``, ``editMessageText``, ``sendChatAction``, ``answerCallbackQuery``, ``getMe``); httpx is
already a core dependency, and the framework's ``Application`` wants to own the event loop, its signal
handlers and its own persistence, which a library embedded in ``serve`` must not give away.

Contract:

- ``serve`` long-polls ``getUpdates`` (``poll_timeout_s``, ``allowed_updates`` = message, callback_query)
  and confirms each batch with the next call's ``offset`` after it was handled, so a crash re-reads
  what was not handled yet. Network errors back off (1 s doubling to 30 s); ``429`` waits
  ``retry_after``; ``401``/``404`` (a revoked or wrong token) stop the channel with a :class:`ChannelError`.
- A text message is taken when :func:`allowed` says so (chat id and sender id as strings); anything else
  (strangers, bots, messages without text, edits) is dropped without an answer and counted in
  ``filtered``. Forum topics (``message_thread_id`` of a topic message) are threads.
- Button presses (``callback_query``) from allowed users in allowed chats go to the hub; the press is
  acknowledged with ``answerCallbackQuery`` (the hub's short text). Others get an acknowledgement saying
  they may not answer, and nothing else.
- ``send`` uses plain text (no parse mode: nothing the model writes is markup), splits at 4096
  characters, replies to the user's message in its topic, and puts choices on an inline keyboard;
  ``edit`` replaces the text and drops the keyboard; ``typing`` sends the ``typing`` chat action.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent_core.adapters.channels._api import ChannelError, PlatformHttp, split_text
from agent_core.adapters.channels._types import (
    ChannelEvents,
    ChatAddress,
    ChoiceAnswer,
    Filtered,
    InboundMessage,
    OutboundMessage,
    Sent,
    allowed,
)

log = logging.getLogger("agent_core.adapters.channels")

DEFAULT_BASE_URL = "https://api.telegram.org"
MESSAGE_LIMIT = 4096
MAX_BACKOFF_S = 30.0


class TelegramChannel:
    """One Telegram bot (see the module docstring)."""

    kind = "telegram"

    def __init__(
        self,
        name: str,
        token: str,
        *,
        allowed_chats: frozenset[str] | set[str] | list[str] = frozenset(),
        allowed_users: frozenset[str] | set[str] | list[str] = frozenset(),
        session_scope: str = "thread",
        base_url: str | None = None,
        poll_timeout_s: int = 30,
    ) -> None:
        self.name = name
        self.session_scope = session_scope
        self._url = f"{(base_url or DEFAULT_BASE_URL).rstrip('/')}/bot{token}"
        self._chats = frozenset(allowed_chats)
        self._users = frozenset(allowed_users)
        self._poll_timeout_s = poll_timeout_s
        self._http = PlatformHttp("telegram", read_timeout_s=poll_timeout_s + 15)
        self._offset: int | None = None
        self.filtered = Filtered()

    async def _call(self, method: str, **params: Any) -> Any:
        status, data = await self._http.post(f"{self._url}/{method}", method, params)
        if isinstance(data, dict) and data.get("ok") is True:
            return data.get("result")
        description = str(data.get("description") if isinstance(data, dict) else "") or f"HTTP {status}"
        retry = data.get("parameters", {}).get("retry_after") if isinstance(data, dict) else None
        raise ChannelError(
            f"telegram {method}: {description}",
            fatal=status in (401, 404),
            retry_after=float(retry) if isinstance(retry, int | float) else None,
        )

    # ---- receiving -------------------------------------------------------------------------------

    async def serve(self, events: ChannelEvents) -> None:
        me = await self._call("getMe")
        log.info("channel %s: polling Telegram as @%s", self.name, (me or {}).get("username", "?"))
        backoff = 1.0
        while True:
            params: dict[str, Any] = {
                "timeout": self._poll_timeout_s,
                "allowed_updates": ["message", "callback_query"],
            }
            if self._offset is not None:
                params["offset"] = self._offset
            try:
                updates = await self._call("getUpdates", **params)
            except ChannelError as exc:
                if exc.fatal:
                    raise
                wait = exc.retry_after if exc.retry_after is not None else backoff
                log.warning("channel %s: %s; retrying in %.0f s", self.name, exc, wait)
                await asyncio.sleep(wait)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = 1.0
            for update in updates or ():
                if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
                    continue
                try:
                    await self._handle(update, events)
                except ChannelError as exc:
                    log.warning("channel %s: %s", self.name, exc)
                except Exception:  # one bad update never stops the channel
                    log.exception("channel %s: handling update %s failed", self.name, update["update_id"])
                finally:
                    self._offset = update["update_id"] + 1

    async def _handle(self, update: dict[str, Any], events: ChannelEvents) -> None:
        if isinstance(update.get("message"), dict):
            message = _inbound(self.name, update["message"])
            if message is None:
                self.filtered.ignored += 1
                return
            if not allowed(message.address.chat_id, message.user_id, self._chats, self._users):
                self.filtered.not_allowed += 1
                log.info(
                    "channel %s: dropped a message from chat %s, user %s (not allowed)",
                    self.name,
                    message.address.chat_id,
                    message.user_id,
                )
                return
            await events.on_message(message)
        elif isinstance(update.get("callback_query"), dict):
            await self._press(update["callback_query"], events)
        else:
            self.filtered.ignored += 1

    async def _press(self, query: dict[str, Any], events: ChannelEvents) -> None:
        sender = query.get("from") or {}
        message = query.get("message") or {}
        chat = message.get("chat") or {}
        user_id, chat_id = str(sender.get("id", "")), str(chat.get("id", ""))
        if not allowed(chat_id, user_id, self._chats, self._users) or sender.get("is_bot"):
            self.filtered.not_allowed += 1
            log.info("channel %s: ignored a button press by user %s (not allowed)", self.name, user_id)
            ack = "You may not answer this request."
        else:
            thread = message.get("message_thread_id") if message.get("is_topic_message") else None
            ack = await events.on_choice(
                ChoiceAnswer(
                    channel=self.name,
                    address=ChatAddress(chat_id, str(thread) if thread is not None else None),
                    user_id=user_id,
                    value=str(query.get("data") or ""),
                    message_id=str(message.get("message_id")) if "message_id" in message else None,
                    platform_ref=str(query.get("id")),
                )
            )
        try:
            await self._call("answerCallbackQuery", callback_query_id=str(query.get("id")), text=ack[:200])
        except ChannelError as exc:
            log.debug("channel %s: %s", self.name, exc)

    # ---- sending ---------------------------------------------------------------------------------

    def _target(self, address: ChatAddress) -> dict[str, Any]:
        target: dict[str, Any] = {"chat_id": _chat_id(address.chat_id)}
        if address.thread_id is not None:
            target["message_thread_id"] = int(address.thread_id)
        return target

    async def send(self, message: OutboundMessage) -> Sent:
        pieces = split_text(message.text, MESSAGE_LIMIT)
        if message.choices:
            pieces = [message.text[: MESSAGE_LIMIT - 1]]
        result: Any = None
        for index, piece in enumerate(pieces):
            params = {**self._target(message.address), "text": piece}
            if index == 0 and message.reply_to is not None:
                params["reply_parameters"] = {
                    "message_id": int(message.reply_to),
                    "allow_sending_without_reply": True,
                }
            if message.choices:
                params["reply_markup"] = {
                    "inline_keyboard": [
                        [{"text": c.label, "callback_data": c.value} for c in message.choices]
                    ]
                }
            result = await self._call("sendMessage", **params)
        message_id = str(result.get("message_id")) if isinstance(result, dict) else ""
        return Sent(message.address, message_id)

    async def edit(self, sent: Sent, text: str) -> None:
        await self._call(
            "editMessageText",
            chat_id=_chat_id(sent.address.chat_id),
            message_id=int(sent.message_id),
            text=text[:MESSAGE_LIMIT],
        )

    async def typing(self, address: ChatAddress, active: bool, message_id: str | None = None) -> None:
        if active:
            await self._call("sendChatAction", **self._target(address), action="typing")

    async def aclose(self) -> None:
        await self._http.aclose()


def _chat_id(chat_id: str) -> int | str:
    try:
        return int(chat_id)
    except ValueError:
        return chat_id  # a channel username (@name)


def _inbound(channel: str, message: dict[str, Any]) -> InboundMessage | None:
    """A user's text message, or ``None`` (no text, no sender, a bot, a service message)."""
    sender = message.get("from") or {}
    chat = message.get("chat") or {}
    text = message.get("text")
    if not isinstance(text, str) or not text.strip() or not sender or sender.get("is_bot"):
        return None
    if "id" not in chat or "id" not in sender:
        return None
    thread = message.get("message_thread_id") if message.get("is_topic_message") else None
    name = sender.get("username") or " ".join(
        p for p in (sender.get("first_name"), sender.get("last_name")) if isinstance(p, str) and p
    )
    return InboundMessage(
        channel=channel,
        address=ChatAddress(str(chat["id"]), str(thread) if thread is not None else None),
        user_id=str(sender["id"]),
        text=text,
        user_name=str(name or ""),
        message_id=str(message["message_id"]) if "message_id" in message else None,
    )
