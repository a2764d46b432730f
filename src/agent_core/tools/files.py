"""Where the built-in file tools get and put text: the public :class:`FileAccess` hook.

``AgentRuntime(file_access=hook)`` lets a host (an editor speaking ACP, for one) serve the text reads of
``code.read_file`` and ``code.edit_file`` and the writes of ``code.write_file`` and ``code.edit_file``, so
the agent sees unsaved editor buffers and its edits land in them. Contract:

- The runtime first does every check on the real file system as without a hook: path resolution (symlinks
  resolved), write roots, sensitive and protected paths, the permission decision, the file's type and
  identity. The hook is then asked about exactly the checked, resolved path; it never widens what a call
  may touch.
- :meth:`FileAccess.read_text` is asked only for an existing regular file whose content on disk is text
  (a binary file is always read from disk). It returns the text the user sees (an editor's buffer) or
  ``None``: the runtime reads the file on disk.
- :meth:`FileAccess.write_text` is called for every write with the text being replaced
  (:attr:`FileWrite.previous_text`, as the hook's :meth:`~FileAccess.read_text` or the disk gave it) and
  the new text. It returns ``True`` when it stored the text itself, ``False`` to let the runtime write the
  file on disk (atomically, as without a hook); so a hook also sees every change, e.g. to show a diff.
- A hook error fails the tool call (``AgentCoreError`` as raised, anything else as ``internal_error``);
  nothing is written by the runtime after a failed :meth:`~FileAccess.write_text`.
- Other tools (``code.search``, ``code.list_dir``, ``code.run_command``, MCP tools) and the change preview
  of a permission prompt read the disk. Runs executed by the Temporal engine's workers do not use the hook.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["FileAccess", "FileRead", "FileWrite"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRead:
    """One text read of a built-in tool: the checked, resolved ``path`` and the calling run."""

    path: Path
    session_id: str
    run_id: str
    agent_id: str
    tool_call_id: str
    tool_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FileWrite:
    """One write of a built-in tool: ``text`` replaces ``previous_text`` (``None``: the file is new)."""

    path: Path
    text: str
    previous_text: str | None
    session_id: str
    run_id: str
    agent_id: str
    tool_call_id: str
    tool_name: str

    @property
    def created(self) -> bool:
        return self.previous_text is None


@runtime_checkable
class FileAccess(Protocol):
    """The hook (see the module docstring). Both methods run on the runtime's event loop."""

    async def read_text(self, read: FileRead) -> str | None:
        """The text of ``read.path`` as the user sees it, or ``None`` to read the file on disk."""
        ...

    async def write_text(self, write: FileWrite) -> bool:
        """Stores ``write.text`` at ``write.path`` and returns ``True``, or ``False`` to let the runtime
        write the file on disk."""
        ...
