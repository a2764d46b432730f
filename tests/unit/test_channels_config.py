"""``[[channels]]`` validation and the pure channel rules (issue 38 item 3): a channel never answers
strangers (both allow lists empty is a configuration error, ``allowed`` is an AND of the lists that are
set), Slack needs its signing secret, names are unique, secrets come from the environment and are
registered with the redactor, and the conversation map survives a damaged file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent_core import _redaction
from agent_core._redaction import Redactor
from agent_core.adapters.channels import ChatAddress, allowed, build_channel
from agent_core.adapters.channels._api import split_text
from agent_core.adapters.channels._sessions import SessionMap
from agent_core.config.schema import Settings
from agent_core.errors import ConfigError

MODEL = {"provider": "ollama", "name": "m"}


def settings(*channels: dict[str, Any]) -> Settings:
    return Settings.model_validate({"model": MODEL, "channels": list(channels)})


def test_a_channel_needs_an_allow_list() -> None:
    with pytest.raises(ValidationError, match="allowed_chats or allowed_users is required"):
        settings({"kind": "telegram", "token_env": "TG"})
    ok = settings({"kind": "telegram", "token_env": "TG", "allowed_chats": ["-100"]})
    assert ok.channels[0].channel_name == "telegram" and ok.channels[0].session_scope == "thread"


def test_slack_needs_its_signing_secret_and_telegram_takes_none() -> None:
    with pytest.raises(ValidationError, match="signing_secret_env is required"):
        settings({"kind": "slack", "token_env": "SL", "allowed_users": ["U1"]})
    with pytest.raises(ValidationError, match="only for slack"):
        settings({"kind": "telegram", "token_env": "TG", "allowed_users": ["1"], "signing_secret_env": "X"})


def test_names_are_unique_and_values_checked() -> None:
    entry = {"kind": "telegram", "token_env": "TG", "allowed_users": ["1"]}
    with pytest.raises(ValidationError, match="duplicate channel name 'telegram'"):
        settings(entry, entry)
    assert len(settings(entry, {**entry, "name": "second"}).channels) == 2
    for bad in (
        {"token_env": "not a var"},
        {"allowed_users": [""]},
        {"base_url": "ftp://x"},
        {"name": "Bad Name"},
    ):
        with pytest.raises(ValidationError):
            settings({**entry, **bad})


def test_allowed_is_an_and_of_the_lists_that_are_set() -> None:
    chats, users = frozenset({"c1"}), frozenset({"u1"})
    assert allowed("c1", "u1", chats, users)
    assert not allowed("c1", "u2", chats, users)
    assert not allowed("c2", "u1", chats, users)
    assert allowed("c2", "u1", frozenset(), users)
    assert allowed("c1", "u9", chats, frozenset())
    assert not allowed("c1", "u1", frozenset(), frozenset())


def test_secrets_come_from_the_environment_and_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_redaction, "_PROCESS_SECRETS", set())  # the test's secrets leave with it
    section = settings(
        {"kind": "slack", "token_env": "SL_TOKEN", "signing_secret_env": "SL_SECRET", "allowed_users": ["U1"]}
    ).channels[0]
    with pytest.raises(ConfigError, match=r"'SL_SECRET' named by channels\[3\].signing_secret_env"):
        build_channel(3, section, {"SL_TOKEN": "xoxb-unit-test-token-1"})
    channel = build_channel(
        0, section, {"SL_TOKEN": "xoxb-unit-test-token-2", "SL_SECRET": "unit-signing-secret-2"}
    )
    assert channel.kind == "slack" and channel.name == "slack"
    text = Redactor(environ={}).text("token xoxb-unit-test-token-2 secret unit-signing-secret-2")
    assert "xoxb-unit-test-token-2" not in text and "unit-signing-secret-2" not in text


def test_session_map_is_durable_private_and_survives_damage(tmp_path: Path) -> None:
    smap = SessionMap(tmp_path, "tg")
    smap.put(ChatAddress("42", "7").key("thread"), "sess_a")
    smap.put(ChatAddress("42", "7").key("chat"), "sess_b")
    again = SessionMap(tmp_path, "tg")
    assert again.get("42/7") == "sess_a" and again.get("42") == "sess_b"
    assert again.keys_for("sess_a") == ["42/7"]
    assert (tmp_path / "channels" / "tg.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "channels").stat().st_mode & 0o777 == 0o700
    (tmp_path / "channels" / "tg.json").write_text("{not json")
    fresh = SessionMap(tmp_path, "tg")
    assert fresh.get("42") is None and (tmp_path / "channels" / "tg.json.bad").exists()
    fresh.put("1", "sess_c")
    assert json.loads((tmp_path / "channels" / "tg.json").read_text())["sessions"] == {"1": "sess_c"}


def test_split_text_keeps_everything() -> None:
    text = "\n".join(f"line {i}" for i in range(2000))
    pieces = split_text(text, 4096)
    assert all(len(p) <= 4096 for p in pieces) and len(pieces) > 1
    assert "\n".join(pieces) == text
    assert split_text("", 10) == [""]
