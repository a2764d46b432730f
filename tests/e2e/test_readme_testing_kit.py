"""The README's testing-kit example runs when copied into a new project (issue 32 item 9).

The ``pyproject.toml`` and ``tests/test_agent.py`` blocks of the README's "Structured output and testing
your agents" section are written, as they are, into an empty project under ``tmp_path``; pytest (this
interpreter, where soong-agent, pytest and pytest-asyncio are installed) runs there twice: the first run
records the cassette, the second replays it. Only that project's settings apply (its own rootdir).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(first_line: str) -> str:
    """The fenced block of the README whose first line is ``first_line``."""
    for match in re.finditer(r"```(?:toml|python)\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        if match.group(1).startswith(first_line + "\n"):
            return match.group(1)
    raise AssertionError(f"no README block starting with {first_line!r}")


def pytest_in(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_readme_testing_kit_example_records_then_replays(tmp_path: Path) -> None:
    project = tmp_path / "my-agent"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text(readme_block("# pyproject.toml"), encoding="utf-8")
    (project / "tests" / "test_agent.py").write_text(readme_block("# tests/test_agent.py"), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RECORD"))}
    env["HOME"] = str(tmp_path / "home")

    first = pytest_in(project, env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 passed" in first.stdout, first.stdout
    cassette = project / "tests" / "cassettes" / "summary.json"
    recorded = json.loads(cassette.read_text(encoding="utf-8"))
    assert recorded  # the record step wrote the model calls

    second = pytest_in(project, env)  # the cassette exists now: replayed
    assert second.returncode == 0, second.stdout + second.stderr
    assert "2 passed" in second.stdout, second.stdout
    assert json.loads(cassette.read_text(encoding="utf-8")) == recorded  # replay never rewrites it
