"""``[[channels]]`` entries → channel adapters, with their secrets read from the environment.

A missing variable is a ``config_error`` naming the variable and the key (``channels[0].token_env``)
before anything connects. Every secret is registered with the process redactor at once, so no event,
stored text, tool output or model request can show it; the adapters never log it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from agent_core._redaction import register_secret
from agent_core.adapters.channels._types import Channel
from agent_core.config.schema import ChannelSection
from agent_core.errors import ConfigError, ErrorCode


def _secret(variable: str, key: str, environ: Mapping[str, str]) -> str:
    value = environ.get(variable, "")
    if not value.strip():
        raise ConfigError(
            ErrorCode.config_error,
            f"environment variable {variable!r} named by {key} is not set",
            details={"variable": variable, "key": key},
        )
    register_secret(value)
    return value.strip()


def project_of(section: ChannelSection, default: Path) -> Path:
    """The project a channel's sessions run on (``project``, else the command's project)."""
    return Path(section.project).resolve() if section.project is not None else default.resolve()


def build_channel(index: int, section: ChannelSection, environ: Mapping[str, str] | None = None) -> Channel:
    """The adapter of ``channels[index]`` (its platform module is imported here, on first use)."""
    env = os.environ if environ is None else environ
    token = _secret(section.token_env, f"channels[{index}].token_env", env)
    if section.kind == "telegram":
        from agent_core.adapters.channels.telegram import TelegramChannel

        return TelegramChannel(
            section.channel_name,
            token,
            allowed_chats=section.allowed_chats,
            allowed_users=section.allowed_users,
            session_scope=section.session_scope,
            base_url=section.base_url,
            poll_timeout_s=section.poll_timeout_s,
        )
    from agent_core.adapters.channels.slack import SlackChannel

    assert section.signing_secret_env is not None  # the schema requires it for slack
    secret = _secret(section.signing_secret_env, f"channels[{index}].signing_secret_env", env)
    return SlackChannel(
        section.channel_name,
        token,
        secret,
        allowed_chats=section.allowed_chats,
        allowed_users=section.allowed_users,
        session_scope=section.session_scope,
        base_url=section.base_url,
        listen_host=section.listen_host,
        listen_port=section.listen_port,
    )


def channels_by_project(
    sections: Sequence[ChannelSection], default_project: Path, environ: Mapping[str, str] | None = None
) -> dict[Path, list[Channel]]:
    """Every configured channel, grouped by the project its sessions run on (config order)."""
    grouped: dict[Path, list[Channel]] = {}
    for index, section in enumerate(sections):
        grouped.setdefault(project_of(section, default_project), []).append(
            build_channel(index, section, environ)
        )
    return grouped
