"""Shared pieces of the benchmarks: a private home/project, the scripted server process and statistics.

Every benchmark runs from the repository root as ``.venv/bin/python -m benchmarks.<name>``. It first calls
:func:`private_home`, which points ``HOME`` and ``SOONG_AGENT_HOME`` at a fresh temporary directory (the
real ``~/.soong-agent`` is never read or written) and returns the home and project paths.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API_KEY_ENV = "SOONG_BENCH_API_KEY"
FILE_COUNT = 10
FILE_TEXT = "File {k}.\n" + "lorem ipsum dolor sit amet, consectetur adipiscing elit\n" * 6


@dataclass
class BenchDirs:
    root: Path
    home: Path
    project: Path


def private_home(prefix: str = "soong-bench-") -> BenchDirs:
    """A fresh temporary home + project; ``HOME``/``SOONG_AGENT_HOME`` now point there. Removed at exit."""
    import atexit

    root = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    atexit.register(shutil.rmtree, root, True)
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    os.environ["HOME"] = str(root)
    os.environ["SOONG_AGENT_HOME"] = str(home)
    os.environ[API_KEY_ENV] = "sk-bench-not-a-real-key"
    for k in range(FILE_COUNT):
        path = project / "notes" / f"file_{k}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(FILE_TEXT.format(k=k), encoding="utf-8")
    return BenchDirs(root, home, project)


def write_config(home: Path, base_url: str, *, context_window: int = 1_000_000, extra: str = "") -> Path:
    """A user config for the scripted OpenAI server: no compaction, no memory, big window, no retries."""
    text = f"""
[model]
provider = "openai"
base_url = "{base_url}"
api_key_env = "{API_KEY_ENV}"
name = "bench-model"
context_window = {context_window}
max_output_tokens = 1024
temperature = 0.0
timeout_ms = 60000

[model.retry]
max_attempts = 1

[context]
reserve_output_tokens = 1024

[compact]
enabled = false

[memory]
enabled = false
{extra}
"""
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def turn_message(i: int) -> str:
    return f"turn {i}: please read notes/file_{i % FILE_COUNT}.txt and summarise it"


@contextmanager
def scripted_server(*args: str) -> Iterator[str]:
    """Starts ``benchmarks._server`` in its own process; yields its ``/v1`` base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._server", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "PORT":
            raise RuntimeError(f"the scripted server did not start: {line!r}")
        yield f"http://127.0.0.1:{line[1]}/v1"
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def median_ms(values: Sequence[float]) -> float:
    return statistics.median(values) * 1000


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100) of ``values``."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def halves_growth(values: Sequence[float]) -> float:
    """Median of the second half divided by the median of the first half."""
    half = len(values) // 2
    return statistics.median(values[half:]) / statistics.median(values[:half])


def rss_mb() -> float:
    """Current resident set size of this process in MiB (Linux ``/proc``)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
