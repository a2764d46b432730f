"""Slack: the Events API over HTTP (signed requests) and Web API replies, with plain httpx.

Why httpx and not ``slack-sdk``: the async ``slack_sdk`` Web client needs aiohttp (a second HTTP stack
next to httpx), and its request verifier is the ten lines below; the adapter calls four Web API methods
(``chat.postMessage``, ``chat.update``, ``reactions.add``, ``reactions.remove``) and ``auth.test``.

Contract:

- ``serve`` listens on ``listen_host:listen_port`` (path ``/slack/events``, for both the Events API and
  the interactivity request URL). Every request is verified before anything else is read: the
  ``X-Slack-Signature`` must equal ``v0=`` + HMAC-SHA256 of ``v0:{X-Slack-Request-Timestamp}:{body}`` with
  the signing secret (constant-time compare), and the timestamp must be within 5 minutes of now; a
  missing, forged or stale signature is ``401`` and nothing is handled.
- ``url_verification`` answers the challenge. ``event_callback`` is answered ``200`` at once (Slack
  retries after 3 s) and handled in a task the channel owns; retried deliveries (same ``event_id``) and
  the second of a ``message`` / ``app_mention`` pair for one message are handled once.
- A message is taken when :func:`allowed` says so (channel id, user id); bot messages, edits and other
  subtypes are ignored; a leading ``<@bot>`` mention is removed. Conversations: a direct message is its
  chat (its thread when written in one); in a channel every top-level message starts a thread, so
  ``session_scope = "thread"`` gives each thread its own session, and answers go into that thread.
- Button presses (``block_actions``) by allowed users in allowed channels go to the hub.
- ``send`` posts ``mrkdwn``-escaped text (``&``, ``<``, ``>``: nothing the model writes can mention
  ``@channel`` or forge a link), split at 3500 characters, choices as buttons in an ``actions`` block;
  ``edit`` is ``chat.update`` without blocks; the typing state is an ``hourglass_flowing_sand``
  reaction on the user's message while a run works.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from agent_core.adapters.channels._api import ChannelError, PlatformHttp, split_text
from agent_core.adapters.channels._http import HttpRequest, HttpResponse, serve_http
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

DEFAULT_BASE_URL = "https://slack.com/api"
EVENTS_PATH = "/slack/events"
MAX_SKEW_S = 300
MESSAGE_LIMIT = 3500
TYPING_REACTION = "hourglass_flowing_sand"
SEEN_KEEP = 2000
_MENTION = re.compile(r"^\s*<@[A-Z0-9]+>\s*")


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    base = b"v0:" + timestamp.encode("ascii", "replace") + b":" + body
    return "v0=" + hmac.new(secret.encode("utf-8"), base, hashlib.sha256).hexdigest()


def verify(secret: str, headers: dict[str, str], body: bytes, now: float) -> str | None:
    """``None`` when the request is Slack's, else why not (the reason is logged, never answered)."""
    timestamp = headers.get("x-slack-request-timestamp", "")
    given = headers.get("x-slack-signature", "")
    if not timestamp or not given:
        return "unsigned request"
    try:
        sent_at = int(timestamp)
    except ValueError:
        return "bad timestamp"
    if abs(now - sent_at) > MAX_SKEW_S:
        return "stale timestamp"
    if not hmac.compare_digest(signature(secret, timestamp, body), given):
        return "bad signature"
    return None


def escape(text: str) -> str:
    """Slack ``mrkdwn`` control characters escaped (no mentions, links or channel pings from text)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackChannel:
    """One Slack app (see the module docstring)."""

    kind = "slack"

    def __init__(
        self,
        name: str,
        token: str,
        signing_secret: str,
        *,
        allowed_chats: frozenset[str] | set[str] | list[str] = frozenset(),
        allowed_users: frozenset[str] | set[str] | list[str] = frozenset(),
        session_scope: str = "thread",
        base_url: str | None = None,
        listen_host: str = "127.0.0.1",
        listen_port: int = 8790,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.session_scope = session_scope
        self._base = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._auth = {"Authorization": f"Bearer {token}"}
        self._secret = signing_secret
        self._chats = frozenset(allowed_chats)
        self._users = frozenset(allowed_users)
        self.listen_host = listen_host
        self._port = listen_port
        self._clock = clock
        self._http = PlatformHttp("slack")
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._reacted: set[tuple[str, str]] = set()
        self._events: ChannelEvents | None = None
        self._work: asyncio.TaskGroup | None = None
        self.port: int | None = None
        """The bound port once listening."""
        self.listening = asyncio.Event()
        self.filtered = Filtered()

    async def _call(self, method: str, **params: Any) -> dict[str, Any]:
        status, data = await self._http.post(f"{self._base}/{method}", method, params, self._auth)
        if isinstance(data, dict) and data.get("ok") is True:
            return data
        error = str(data.get("error") if isinstance(data, dict) else "") or f"HTTP {status}"
        fatal = error in ("invalid_auth", "not_authed", "account_inactive", "token_revoked")
        raise ChannelError(f"slack {method}: {error}", fatal=fatal)

    # ---- receiving -------------------------------------------------------------------------------

    async def serve(self, events: ChannelEvents) -> None:
        auth = await self._call("auth.test")
        log.info(
            "channel %s: Slack app %s in team %s", self.name, auth.get("user", "?"), auth.get("team", "?")
        )
        self._events = events

        def listening(port: int) -> None:
            self.port = port
            self.listening.set()
            log.info(
                "channel %s: Slack events endpoint on http://%s:%d%s",
                self.name,
                self.listen_host,
                port,
                EVENTS_PATH,
            )

        async with asyncio.TaskGroup() as work:
            self._work = work
            try:
                await serve_http(self.listen_host, self._port, self._request, listening)
            finally:
                self._work = None

    async def _request(self, request: HttpRequest) -> HttpResponse:
        if request.path != EVENTS_PATH:
            return HttpResponse(404, b"not found")
        if request.method != "POST":
            return HttpResponse(405, b"POST only")
        problem = verify(self._secret, request.headers, request.body, self._clock())
        if problem is not None:
            self.filtered.bad_signature += 1
            log.warning("channel %s: refused a request to the events endpoint: %s", self.name, problem)
            return HttpResponse(401, b"invalid signature")
        if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            form = parse_qs(request.body.decode("utf-8", "replace"))
            try:
                payload = json.loads(form.get("payload", ["{}"])[0])
            except ValueError:
                return HttpResponse(400, b"bad payload")
            if isinstance(payload, dict) and payload.get("type") == "block_actions":
                self._later(self._press(payload))
            return HttpResponse(200)
        try:
            body = json.loads(request.body)
        except ValueError:
            return HttpResponse(400, b"bad JSON")
        if not isinstance(body, dict):
            return HttpResponse(400, b"bad JSON")
        if body.get("type") == "url_verification":
            challenge = json.dumps({"challenge": str(body.get("challenge", ""))}).encode()
            return HttpResponse(200, challenge, "application/json")
        event = body.get("event")
        if (
            body.get("type") == "event_callback"
            and isinstance(event, dict)
            and self._first(f"event:{body.get('event_id')}")
        ):
            self._later(self._event(event))
        return HttpResponse(200)

    def _first(self, key: str) -> bool:
        if key in self._seen:
            return False
        self._seen[key] = None
        while len(self._seen) > SEEN_KEEP:
            self._seen.popitem(last=False)
        return True

    def _later(self, coro: Any) -> None:
        if self._work is None:
            coro.close()
            return
        self._work.create_task(self._guarded(coro))

    async def _guarded(self, coro: Any) -> None:
        try:
            await coro
        except ChannelError as exc:
            log.warning("channel %s: %s", self.name, exc)
        except Exception:
            log.exception("channel %s: handling a Slack request failed", self.name)

    async def _event(self, event: dict[str, Any]) -> None:
        assert self._events is not None
        if event.get("type") not in ("message", "app_mention"):
            self.filtered.ignored += 1
            return
        if event.get("bot_id") or event.get("subtype") or not event.get("user"):
            self.filtered.ignored += 1
            return
        channel, user = str(event.get("channel", "")), str(event["user"])
        ts = str(event.get("ts", ""))
        text = _MENTION.sub("", str(event.get("text", "")))
        if not channel or not ts or not text.strip() or not self._first(f"message:{channel}:{ts}"):
            self.filtered.ignored += 1
            return
        if not allowed(channel, user, self._chats, self._users):
            self.filtered.not_allowed += 1
            log.info(
                "channel %s: dropped a message from channel %s, user %s (not allowed)",
                self.name,
                channel,
                user,
            )
            return
        direct = event.get("channel_type") == "im"
        thread = event.get("thread_ts") or (None if direct else ts)
        await self._events.on_message(
            InboundMessage(
                channel=self.name,
                address=ChatAddress(channel, str(thread) if thread else None),
                user_id=user,
                text=text,
                message_id=ts,
            )
        )

    async def _press(self, payload: dict[str, Any]) -> None:
        assert self._events is not None
        user = str((payload.get("user") or {}).get("id", ""))
        channel = str((payload.get("channel") or {}).get("id", ""))
        actions = payload.get("actions") or []
        if not actions or not isinstance(actions[0], dict):
            self.filtered.ignored += 1
            return
        if not allowed(channel, user, self._chats, self._users):
            self.filtered.not_allowed += 1
            log.info("channel %s: ignored a button press by user %s (not allowed)", self.name, user)
            return
        message = payload.get("message") or {}
        container = payload.get("container") or {}
        ts = str(container.get("message_ts") or message.get("ts") or "")
        thread = message.get("thread_ts")
        await self._events.on_choice(
            ChoiceAnswer(
                channel=self.name,
                address=ChatAddress(channel, str(thread) if thread else None),
                user_id=user,
                value=str(actions[0].get("value", "")),
                message_id=ts or None,
            )
        )

    # ---- sending ---------------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> Sent:
        target: dict[str, Any] = {"channel": message.address.chat_id}
        if message.address.thread_id:
            target["thread_ts"] = message.address.thread_id
        if message.choices:
            text = escape(message.text[:MESSAGE_LIMIT])
            buttons = [
                {
                    "type": "button",
                    "action_id": f"soong_choice_{index}",
                    "text": {"type": "plain_text", "text": choice.label},
                    "value": choice.value,
                    **({"style": "danger"} if choice.value.endswith(":d") else {}),
                }
                for index, choice in enumerate(message.choices)
            ]
            blocks = [
                {"type": "section", "text": {"type": "mrkdwn", "text": text}},
                {"type": "actions", "elements": buttons},
            ]
            result = await self._call("chat.postMessage", **target, text=text, blocks=blocks)
            return Sent(message.address, str(result.get("ts", "")))
        result = {}
        for piece in split_text(message.text, MESSAGE_LIMIT):
            result = await self._call("chat.postMessage", **target, text=escape(piece))
        return Sent(message.address, str(result.get("ts", "")))

    async def edit(self, sent: Sent, text: str) -> None:
        await self._call(
            "chat.update",
            channel=sent.address.chat_id,
            ts=sent.message_id,
            text=escape(text[:MESSAGE_LIMIT]),
            blocks=[],
        )

    async def typing(self, address: ChatAddress, active: bool, message_id: str | None = None) -> None:
        if message_id is None:
            return
        key = (address.chat_id, message_id)
        if active and key not in self._reacted:
            self._reacted.add(key)
            await self._call(
                "reactions.add", channel=address.chat_id, timestamp=message_id, name=TYPING_REACTION
            )
        elif not active and key in self._reacted:
            self._reacted.discard(key)
            await self._call(
                "reactions.remove", channel=address.chat_id, timestamp=message_id, name=TYPING_REACTION
            )

    async def aclose(self) -> None:
        await self._http.aclose()
