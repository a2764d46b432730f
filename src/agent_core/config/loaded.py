"""The :class:`LoadedConfig` value: validated settings plus the locations they were resolved against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent_core.config.schema import Settings


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A validated configuration plus the resolved locations it was interpreted against.

    ``session_db_path`` is the effective database path (constructor argument > ``context.session_db_path`` >
    ``<home>/sessions.sqlite``); ``settings.context.session_db_path`` holds the same value.
    """

    home: Path
    project: Path
    config_path: Path
    settings: Settings
    session_db_path: Path
