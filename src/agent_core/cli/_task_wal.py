"""``soong-agent task-wal list|export``: a session's Task WALs, and one of them in its JSONL file form.

``task-wal list <session_id>`` prints one line per WAL (name, first Task id, last record type, path).
``task-wal export <session_id> [<name or task id>] [--output FILE]`` writes the WAL's JSONL bytes to
stdout (or FILE): with the ``sqlite`` backend the file's bytes, with ``postgres`` the stored lines —
byte-identical to the file the ``sqlite`` backend writes for the same records (docs/storage.md#backends). The
name may be left out when the session has exactly one WAL. Errors are one line on stderr. Exit status:
0 on success, 1 on an error (unknown session or WAL, several WALs and no name, storage errors).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import TextIO

from agent_core.cli._terminal import Output, error_text, escape_terminal

EXIT_OK, EXIT_FAILED = 0, 1


async def task_wal_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent task-wal <action>``; returns the exit status."""
    from agent_core import AgentRuntime
    from agent_core.errors import AgentCoreError

    try:
        async with AgentRuntime(project_dir=args.path) as runtime:
            session_id = str(args.session_id)
            if args.task_wal_action == "list":
                for w in await runtime.list_task_wals(session_id):
                    fields = (w.name, f"task={w.task_id or '?'}", f"last={w.last_event_type or '?'}", w.path)
                    out.write("\t".join(escape_terminal(f) for f in fields) + "\n")
                return EXIT_OK
            _, data = await runtime.export_task_wal(session_id, args.name)
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    if args.output:
        try:
            _write_file(Path(args.output), data)
        except OSError as exc:
            err.write(
                f"soong-agent: error: cannot write {escape_terminal(str(args.output))}: {exc.strerror}\n"
            )
            return EXIT_FAILED
        return EXIT_OK
    _write_bytes(out, data)
    return EXIT_OK


def _write_file(path: Path, data: bytes) -> None:
    """Whole or not at all: a temporary file next to ``path``, renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_bytes(out: Output, data: bytes) -> None:
    """The exact bytes on the output stream (its binary buffer; a closed pipe is ignored as by Output)."""
    buffer = getattr(out.stream, "buffer", None)
    if buffer is None:
        out.write(data.decode("utf-8"))
        return
    try:
        out.stream.flush()
        buffer.write(data)
        buffer.flush()
    except (BrokenPipeError, ValueError):
        out.write("")  # nothing more is written
