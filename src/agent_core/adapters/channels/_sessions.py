"""The durable map from a channel's conversations to soong-agent sessions.

One JSON file per channel, ``<home>/channels/<channel name>.json`` (directory 0700, file 0600), holding
``{"version": 1, "sessions": {"<conversation key>": "<session_id>"}}``. Every change is written to a
temporary file and renamed over the old one, so a crash leaves either map, never half of one; a restart
of ``soong-agent channels`` or ``serve`` continues each conversation in its session. A damaged file is
moved aside (``.json.bad``) with a warning and the channel starts a fresh map: a conversation then gets a
new session, nothing else is lost.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger("agent_core.adapters.channels")

VERSION = 1


class SessionMap:
    """Conversation key → session id of one channel, persisted on every change."""

    def __init__(self, home: Path, channel: str) -> None:
        self.path = home / "channels" / f"{channel}.json"
        self._sessions: dict[str, str] = self._load()

    def _load(self) -> dict[str, str]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw)
            sessions = data["sessions"] if data.get("version") == VERSION else None
            if not isinstance(sessions, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in sessions.items()
            ):
                raise ValueError("not a session map")
        except (ValueError, KeyError, AttributeError, TypeError):
            aside = self.path.with_suffix(".json.bad")
            os.replace(self.path, aside)
            log.warning(
                "channel session map %s is damaged; moved to %s, starting a new map", self.path, aside
            )
            return {}
        return dict(sessions)

    def get(self, key: str) -> str | None:
        return self._sessions.get(key)

    def keys_for(self, session_id: str) -> list[str]:
        return [k for k, v in self._sessions.items() if v == session_id]

    def sessions(self) -> dict[str, str]:
        return dict(self._sessions)

    def put(self, key: str, session_id: str) -> None:
        self._sessions[key] = session_id
        self._save()

    def _save(self) -> None:
        folder = self.path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        text = json.dumps({"version": VERSION, "sessions": self._sessions}, indent=1, sort_keys=True)
        temp = folder / f".{self.path.name}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
