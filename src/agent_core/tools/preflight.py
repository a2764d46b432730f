"""The :class:`Preflight` facts an adapter gathers about one call before hooks and permissions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent_core.tools._safe_fs import FileIdentity

if TYPE_CHECKING:
    from agent_core.permissions._protected import ProtectedPath
    from agent_core.tools._builtin.preview import ChangePreview


@dataclass(kw_only=True, slots=True)
class Preflight:
    """Facts about one call gathered before hooks and permissions (docs/tools.md#execution-pipeline step 3).

    An adapter that touches paths, runs commands or contacts hosts implements
    ``async def preflight(call, ctx) -> Preflight``; it raises :class:`AgentCoreError` for hard boundary
    errors (e.g. ``write_outside_allowed_roots`` for a command cwd, ``path_conflict``), which become the
    call's error result without asking anyone.
    """

    target_scope: str | None = None
    """Normalised scope for ``allow_for_session`` (docs/permissions.md#target-scopes); ``None`` disables
    it."""
    target_paths: list[Path] = field(default_factory=list)
    """Resolved paths the call touches (sensitive checks, hook ``path_prefix`` matching)."""
    network_host: str | None = None
    cwd: Path | None = None
    """Command/working directory; ``None`` means ``<project>``."""
    env_summary: dict[str, str] = field(default_factory=dict)
    sensitive: bool = False
    """A target is on a sensitive path (reads/lists/searches must ask)."""
    outside_write_roots: bool = False
    """A write target lies outside the allowed write roots (ask with ``suggested_decision=deny``)."""
    outside_project_search: bool = False
    """``code.search`` root outside ``<project>`` (asks)."""
    protected: tuple[ProtectedPath, ...] = ()
    """Targets in a protected class (git internals, soong-agent's state, credential files): the call always
    asks, suggests deny, and no permission rule or session grant covers it."""
    executable: Path | None = None
    """The absolute file a command call runs (shown in the permission prompt and recorded in the audit)."""
    change_preview: Callable[[], ChangePreview | None] | None = None
    """Lazy diff of what the call would change (write/edit tools); called only for a permission prompt."""
    identities: dict[Path, FileIdentity] = field(default_factory=dict)
    """Device + inode of the checked paths that existed at pre-flight; the tool refuses to act on a path
    whose identity changed since (``path_conflict``)."""
