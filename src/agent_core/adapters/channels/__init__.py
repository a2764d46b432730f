"""Chat channels: Telegram and Slack in front of the session inbox (``docs/channels.md``).

- :class:`Channel` — the adapter protocol (receive, send, edit, typing), with the platform-neutral
  :class:`InboundMessage`, :class:`OutboundMessage`, :class:`Choice` and :class:`ChoiceAnswer`;
- :class:`ChannelHub` — maps each conversation to a session (durably), delivers messages as ``channel``
  inbox entries, sends the answers back, and turns permission requests into button choices;
- :mod:`~agent_core.adapters.channels.telegram` (Bot API long polling) and
  :mod:`~agent_core.adapters.channels.slack` (Events API with signature verification, Web API), both on
  httpx; imported only when such a channel is configured;
- :func:`channels_by_project` — ``[[channels]]`` of ``config.toml`` to adapters.

The hub is a client of the public SDK: ``AgentRuntime.create_session``, ``deliver``, ``run_handle``,
``replay_session`` / ``replay_run``, ``answer_permission`` and the permission callback's ``DEFER``.
"""

from agent_core.adapters.channels._config import build_channel, channels_by_project, project_of
from agent_core.adapters.channels._hub import ChannelHub, question_text
from agent_core.adapters.channels._types import (
    Channel,
    ChannelEvents,
    ChatAddress,
    Choice,
    ChoiceAnswer,
    InboundMessage,
    OutboundMessage,
    Sent,
    allowed,
)

__all__ = [
    "Channel",
    "ChannelEvents",
    "ChannelHub",
    "ChatAddress",
    "Choice",
    "ChoiceAnswer",
    "InboundMessage",
    "OutboundMessage",
    "Sent",
    "allowed",
    "build_channel",
    "channels_by_project",
    "project_of",
    "question_text",
]
