"""Instruction files: catalog scan, the ``instruction_catalog`` block and loaded ``instruction:<path>`` blocks.

Contracts (docs/context.md#instruction-files, docs/context.md#loading, docs/context.md#the-catalog):

- :func:`scan_instruction_catalog` walks the user sources (``${home}/CLAUDE.md``, ``${home}/AGENTS.md``,
  ``${home}/rules/**/*.md``) and the project sources (``<project>/**/CLAUDE.md``, ``<project>/**/AGENTS.md``),
  skipping :data:`~agent_core.tools._paths.SKIP_DIRS`, ``<project>/.soong-agent/``, the home when it lies
  inside the project and symlinked directories. ``CLAUDE.md`` wins over ``AGENTS.md`` in one directory.
  Every entry also satisfies :func:`~agent_core.tools._instruction_files.match_instruction_file` (the
  predicate ``code.read_file`` uses), so a symlinked file resolving outside its source is left out.
  Entries carry paths and frontmatter only, never bodies; at most :data:`MAX_CATALOG_ENTRIES`, user entries
  first, then project entries, each group by relative POSIX path.
- :func:`instruction_blocks` turns the latest ``instruction_context`` node per path on the active path
  (compacted nodes included) into dynamic blocks, most recently loaded first, checking freshness on disk.

Scanning and freshness checks do blocking file I/O; async callers run them in a worker thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, Literal

from agent_core._frontmatter import Frontmatter, split_frontmatter
from agent_core._jsontext import compact_json
from agent_core.tools._instruction_files import INSTRUCTION_NAMES, PROJECT_PRIVATE_DIR, match_instruction_file
from agent_core.tools._paths import SKIP_DIRS
from agent_core.types.content import TextBlock
from agent_core.types.enums import NodeType
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import Node

logger = logging.getLogger("agent_core._context.instructions")

InstructionScope = Literal["user", "project"]

RULES_DIR = "rules"
MAX_CATALOG_ENTRIES = 200
CATALOG_BLOCK_ID = "instruction_catalog"
CATALOG_PRIORITY = 70
INSTRUCTION_PRIORITY = 110
INSTRUCTION_SOURCE = "instruction"
FRONTMATTER_READ_LIMIT = 64 * 1024
"""Bytes read from the head of a file to find its frontmatter (the catalog never needs the body)."""


# ------------------------------------------------------------------------------------------------ catalog


@dataclass(frozen=True, kw_only=True, slots=True)
class InstructionEntry:
    path: str
    """Resolved absolute path, usable with ``code.read_file``."""
    scope: InstructionScope
    relative_path: str
    """POSIX path relative to ``${SOONG_AGENT_HOME}`` (user) or ``<project>`` (project)."""
    frontmatter: dict[str, Any] = field(default_factory=dict)
    frontmatter_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The contract entry shape; ``frontmatter_error: true`` is added only for unparsable frontmatter."""
        out: dict[str, Any] = {
            "path": self.path,
            "scope": self.scope,
            "relative_path": self.relative_path,
            "frontmatter": self.frontmatter,
        }
        if self.frontmatter_error:
            out["frontmatter_error"] = True
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class InstructionCatalog:
    entries: tuple[InstructionEntry, ...]
    truncated: bool
    total_found: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "truncated": self.truncated,
            "total_found": self.total_found,
            "entries": [e.to_dict() for e in self.entries],
        }


def scan_instruction_catalog(
    home: Path, project: Path, *, limit: int = MAX_CATALOG_ENTRIES
) -> InstructionCatalog:
    """Scans the instruction sources afresh (called at every run start; docs/context.md#the-catalog)."""
    home = home.resolve()
    project = project.resolve()
    user = sorted(_scan_user(home, project), key=lambda e: e.relative_path)
    proj = sorted(_scan_project(home, project), key=lambda e: e.relative_path)
    found = user + proj
    return InstructionCatalog(
        entries=tuple(found[:limit]), truncated=len(found) > limit, total_found=len(found)
    )


def _pick_name(directory: str, filenames: Sequence[str]) -> str | None:
    for name in INSTRUCTION_NAMES:
        if name in filenames and os.path.isfile(os.path.join(directory, name)):
            return name
    return None


def _entry(file: Path, scope: InstructionScope, home: Path, project: Path) -> InstructionEntry | None:
    resolved = file.resolve()
    ref = match_instruction_file(resolved, project_dir=project, home_dir=home)
    if ref is None or ref.scope != scope:
        logger.debug("instruction candidate %s resolves outside its source; skipped", file)
        return None
    front = _read_frontmatter(resolved)
    return InstructionEntry(
        path=str(resolved),
        scope=scope,
        relative_path=ref.relative_path,
        frontmatter=front.data,
        frontmatter_error=front.error,
    )


def _read_frontmatter(path: Path) -> Frontmatter:
    try:
        with path.open("rb") as fh:
            head = fh.read(FRONTMATTER_READ_LIMIT)
    except OSError as exc:
        logger.warning("instruction file %s is unreadable: %s", path, exc)
        return Frontmatter(error=True)
    front = split_frontmatter(head.decode("utf-8", errors="replace"))
    if front.error:
        logger.warning("instruction file %s has unparsable frontmatter", path)
    return front


def _scan_user(home: Path, project: Path) -> list[InstructionEntry]:
    out: list[InstructionEntry] = []
    if not home.is_dir():
        return out
    name = _pick_name(str(home), os.listdir(home))
    if name is not None and (entry := _entry(home / name, "user", home, project)) is not None:
        out.append(entry)
    rules = home / RULES_DIR
    if not rules.is_dir() or rules.is_symlink():
        return out
    for dirpath, dirnames, filenames in os.walk(rules, followlinks=False):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for filename in filenames:
            file = Path(dirpath, filename)
            if filename.endswith(".md") and file.is_file():
                entry = _entry(file, "user", home, project)
                if entry is not None:
                    out.append(entry)
    return out


def _scan_project(home: Path, project: Path) -> list[InstructionEntry]:
    """``os.walk(project)`` with the same pruning, on ``os.scandir`` entries: one directory read per
    directory, the kind of each entry from the listing (no ``stat`` per name), only instruction names
    checked further. Unreadable directories are skipped (as ``os.walk`` does)."""
    out: list[InstructionEntry] = []
    if not project.is_dir() or home == project:
        return out
    home_text, top = str(home), str(project)
    pending = [top]
    while pending:
        dirpath = pending.pop()
        found: list[str] = []
        try:
            with os.scandir(dirpath) as listing:
                for entry in listing:
                    name = entry.name
                    if name in INSTRUCTION_NAMES:
                        found.append(name)
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)  # a symlinked directory is not entered
                    except OSError:
                        continue
                    if (
                        is_dir
                        and name not in SKIP_DIRS
                        and not (dirpath == top and name == PROJECT_PRIVATE_DIR)
                        and entry.path != home_text
                    ):
                        pending.append(entry.path)
        except OSError:
            continue
        picked = _pick_name(dirpath, found) if found else None
        if picked is not None and (chosen := _entry(Path(dirpath, picked), "project", home, project)):
            out.append(chosen)
    return out


def _json_line(value: dict[str, Any]) -> str:
    text = compact_json(value)
    return text.replace("</", "<\\/")


def catalog_block(catalog: InstructionCatalog) -> SystemBlock:
    """The static ``instruction_catalog`` block: one compact JSON entry per line, no file bodies."""
    head = (
        f'<instruction_catalog truncated="{str(catalog.truncated).lower()}" '
        f'total_found="{catalog.total_found}">'
    )
    lines = [head, *(_json_line(e.to_dict()) for e in catalog.entries), "</instruction_catalog>"]
    return SystemBlock(
        block_id=CATALOG_BLOCK_ID,
        source=CATALOG_BLOCK_ID,
        content="\n".join(lines),
        priority=CATALOG_PRIORITY,
        dynamic=False,
        metadata={
            "truncated": catalog.truncated,
            "total_found": catalog.total_found,
            "entry_count": len(catalog.entries),
        },
    )


# ------------------------------------------------------------------------------------ loaded instructions


def file_hash(data: bytes) -> str:
    """SHA-256 hex digest of the file bytes (the ``hash`` of an ``instruction_context`` node)."""
    return hashlib.sha256(data).hexdigest()


def latest_instruction_nodes(path: Sequence[Node]) -> list[Node]:
    """The latest ``instruction_context`` node per file path on ``path``, most recently loaded first.

    Nodes covered by a compaction stay effective (they are system state, not conversation).
    """
    latest: dict[str, tuple[int, Node]] = {}
    for index, node in enumerate(path):
        if node.node_type != NodeType.instruction_context:
            continue
        file_path = node.metadata.get("path")
        if isinstance(file_path, str) and file_path:
            latest[file_path] = (index, node)
    return [node for _, node in sorted(latest.values(), key=lambda item: item[0], reverse=True)]


class InstructionIndex:
    """Incremental :func:`latest_instruction_nodes` over an append-only active path.

    Re-scans only the nodes appended since the previous call when it is given the same path list again;
    any other change (a new list, a truncated or rewritten path) triggers a full scan.
    """

    __slots__ = ("_latest", "_list_id", "_scanned", "_tail_id")

    def __init__(self) -> None:
        self._list_id = 0
        self._scanned = 0
        self._tail_id: str | None = None
        self._latest: dict[str, tuple[int, Node]] = {}

    def latest(self, path: Sequence[Node]) -> list[Node]:
        same = (
            id(path) == self._list_id
            and len(path) >= self._scanned
            and (self._scanned == 0 or path[self._scanned - 1].node_id == self._tail_id)
        )
        if not same:
            self._latest = {}
            self._scanned = 0
            self._list_id = id(path)
        for index in range(self._scanned, len(path)):
            node = path[index]
            if node.node_type != NodeType.instruction_context:
                continue
            file_path = node.metadata.get("path")
            if isinstance(file_path, str) and file_path:
                self._latest[file_path] = (index, node)
        self._scanned = len(path)
        self._tail_id = path[-1].node_id if path else None
        return [node for _, node in sorted(self._latest.values(), key=lambda item: item[0], reverse=True)]


def truncation_marker(path: str) -> str:
    """Marker the composer appends when an instruction block is cut; it points to ``code.read_file``."""
    return (
        "\n[... instruction file truncated to fit the context budget; read the rest with "
        f'code.read_file(path="{path}") ...]\n</instruction>'
    )


def instruction_blocks(
    path: Sequence[Node], index: InstructionIndex | None = None
) -> tuple[list[SystemBlock], list[dict[str, Any]]]:
    """Dynamic ``instruction:<path>`` blocks for the loaded instruction files on ``path``.

    Freshness (checked at every build): when a file's ``mtime_ns``/size differ from its node, it is
    re-hashed and, if the hash differs, re-read so the block carries the current content; a deleted or
    unreadable file's block is dropped. The second value lists one note per such check for the
    ``ContextBuildReport`` (``{path, node_id, action, reason, old_hash, new_hash}``).
    """
    blocks: list[SystemBlock] = []
    notes: list[dict[str, Any]] = []
    for node in index.latest(path) if index is not None else latest_instruction_nodes(path):
        block, note = _fresh_block(node)
        if note is not None:
            notes.append(note)
        if block is not None:
            blocks.append(block)
    return blocks, notes


def _fresh_block(node: Node) -> tuple[SystemBlock | None, dict[str, Any] | None]:
    meta = node.metadata
    file_path = str(meta["path"])
    old_hash = meta.get("hash")
    text = "".join(b.text for b in node.content if isinstance(b, TextBlock))
    note: dict[str, Any] | None = None

    def make_note(action: str, reason: str, new_hash: str | None = None) -> dict[str, Any]:
        return {
            "path": file_path,
            "node_id": node.node_id,
            "action": action,
            "reason": reason,
            "old_hash": old_hash,
            "new_hash": new_hash,
        }

    try:
        st = os.stat(file_path)
    except OSError:
        return None, make_note("dropped", "missing")
    if not stat.S_ISREG(st.st_mode):
        return None, make_note("dropped", "not_a_file")
    current_hash = old_hash
    if st.st_mtime_ns != meta.get("mtime_ns") or st.st_size != meta.get("size_bytes"):
        try:
            data = Path(file_path).read_bytes()
        except OSError:
            return None, make_note("dropped", "unreadable")
        current_hash = file_hash(data)
        if current_hash != old_hash:
            text = data.decode("utf-8", errors="replace")
            note = make_note("reloaded", "content_changed", current_hash)
        else:
            note = make_note("kept", "hash_unchanged", current_hash)
    scope = str(meta.get("scope") or "")
    content = f'<instruction path="{escape(file_path)}" scope="{escape(scope)}">\n{text}\n</instruction>'
    block = SystemBlock(
        block_id=f"instruction:{file_path}",
        source=INSTRUCTION_SOURCE,
        content=content,
        priority=INSTRUCTION_PRIORITY,
        dynamic=True,
        metadata={
            "path": file_path,
            "scope": scope,
            "hash": current_hash,
            "node_id": node.node_id,
            "loaded_by_tool_call_id": meta.get("loaded_by_tool_call_id"),
            "reloaded": current_hash != old_hash,
            "truncation_marker": truncation_marker(file_path),
        },
    )
    return block, note
