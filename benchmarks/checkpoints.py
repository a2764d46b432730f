"""Checkpoint walks of a command on a project-sized tree (issue 37 item 1).

Builds a synthetic project (``--files`` source files of ``--size`` bytes in nested directories, plus a
``.git`` directory, a ``node_modules`` tree and a ``.gitignore``d ``build`` directory of the same size that
the walk must skip), then times the checkpoint service the way the tool pipeline uses it around
``code.run_command``:

* the first checkpoint of a session (every file's content read and stored once);
* a checkpoint of a command that changes nothing (``stat`` only: the stat cache);
* a checkpoint of a command that edits 10 files and creates 10 (only those read and stored);

and prints each median with the store size. Runs on a private temporary directory.

    .venv/bin/python -m benchmarks.checkpoints [--files 10000] [--size 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from agent_core._checkpoints.service import CheckpointService
from agent_core.config.schema import Settings
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition

COMMAND = ToolDefinition(
    name="code.run_command",
    description="run",
    input_schema={"type": "object"},
    permission="write",
    tags=["code", "dangerous"],
)


def build_tree(root: Path, files: int, size: int) -> None:
    payload = (b"x" * 63 + b"\n") * (size // 64 + 1)
    for i in range(files):
        directory = root / "src" / f"pkg{i % 50}" / f"mod{i % 7}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"file{i}.py").write_bytes(payload[:size])
    for skipped in (".git/objects", "node_modules/lib", "build/out"):
        directory = root / skipped
        directory.mkdir(parents=True, exist_ok=True)
        for i in range(files // 4):
            (directory / f"blob{i}").write_bytes(payload[:size])
    (root / ".gitignore").write_text("build/\n*.log\n")


async def checkpoint(service: CheckpointService, project: Path, session_id: str, change: int) -> float:
    call = ToolCall(tool_call_id="call_bench", name=COMMAND.name, arguments={})
    started = time.perf_counter()
    opened = await service.open(
        call,
        COMMAND,
        Preflight(),
        session_id=session_id,
        run_id="run_bench",
        agent_id="agent_bench",
        project=project,
        base_node_seq=None,
    )
    before = time.perf_counter() - started
    for i in range(change):  # the "command": edit and create files, not timed
        (project / "src" / f"pkg{i}" / f"mod{i % 7}" / f"file{i}.py").write_text(f"edited {time.time()}\n")
        (project / f"new{i}.txt").write_text("new\n")
    started = time.perf_counter()
    await service.close(opened)
    return before + time.perf_counter() - started


def store_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in (home / "sessions").rglob("*") if p.is_file())


async def main(files: int, size: int, repeat: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="soong-bench-ckpt-"))
    try:
        project, home = scratch / "project", scratch / "home"
        project.mkdir()
        home.mkdir()
        build_tree(project, files, size)
        settings = Settings.model_validate({"model": {"provider": "x", "name": "y"}})
        firsts, unchanged, changed = [], [], []
        for r in range(repeat):
            service = CheckpointService(settings, home)
            session = f"sess_bench{r}"
            firsts.append(await checkpoint(service, project, session, 0))
            unchanged.append(await checkpoint(service, project, session, 0))
            changed.append(await checkpoint(service, project, session, 10))
        walked = sum(1 for _ in (project / "src").rglob("*"))
        print(
            f"tree: {files} files of {size} B under src/ ({walked} entries walked), plus 3 x {files // 4} skipped"
        )
        print(
            f"first checkpoint (reads and stores every file): median {statistics.median(firsts) * 1000:.0f} ms"
        )
        print(
            f"command changing nothing (stat walks only):     median {statistics.median(unchanged) * 1000:.0f} ms"
        )
        print(
            f"command editing 10 and creating 10 files:        median {statistics.median(changed) * 1000:.0f} ms"
        )
        print(
            f"store per session: {store_bytes(home) / repeat / 1e6:.1f} MB (zlib; source {files * size / 1e6:.1f} MB)"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    os.environ.setdefault("HOME", tempfile.gettempdir())
    asyncio.run(main(options.files, options.size, options.repeat))
