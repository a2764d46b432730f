"""Suite-wide isolation (docs/testing.md#isolation): fake HOME, real-home guard, network guard, clean env."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.env import SoongEnv

pytest_plugins = [
    "tests.fixtures.scripted_fixtures",
    "tests.fixtures.llama_server",
    "tests.fixtures.postgres_server",
    "tests.fixtures.temporal_server",
    "tests.fixtures.web_pages",
]

REAL_HOME = Path(os.path.expanduser("~")).resolve()
_LOOPBACK_PREFIXES = ("127.", "::1", "localhost", "0:0:0:0:0:0:0:1")


def _snapshot(root: Path) -> dict[str, tuple[int, int]] | None:
    if not root.exists():
        return None
    snap: dict[str, tuple[int, int]] = {}
    for path in sorted(root.rglob("*")):
        try:
            st = path.lstat()
        except OSError:
            continue
        snap[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return snap


@pytest.fixture(scope="session", autouse=True)
def real_home_guard() -> Iterator[None]:
    """Fails the session if the real ``~/.soong-agent`` changed (O10)."""
    target = REAL_HOME / ".soong-agent"
    before = _snapshot(target)
    yield
    after = _snapshot(target)
    assert before == after, f"the test session modified the real {target}"


@pytest.fixture(scope="session", autouse=True)
def session_home(real_home_guard: None) -> Iterator[Path]:
    """Points HOME at a temporary directory for the whole session."""
    fake = Path(tempfile.mkdtemp(prefix="soong-home-")).resolve()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(fake))
        yield fake


def _is_loopback(address: Any) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    if isinstance(address, tuple) and address:
        host = str(address[0])
        return host.startswith(_LOOPBACK_PREFIXES) or host == ""
    return False


@pytest.fixture(scope="session", autouse=True)
def network_guard() -> Iterator[None]:
    """Refuses every non-loopback connection attempt."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create = socket.create_connection

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
            raise ConnectionRefusedError(f"network guard: non-loopback connection to {address!r}")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
            raise ConnectionRefusedError(f"network guard: non-loopback connection to {address!r}")
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_loopback(address):
            raise ConnectionRefusedError(f"network guard: non-loopback connection to {address!r}")
        return real_create(address, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket.socket, "connect_ex", connect_ex)
        mp.setattr(socket, "create_connection", create_connection)
        yield


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removes inherited SOONG_* and provider key variables."""
    for name in list(os.environ):
        if name.startswith("SOONG_") or name in {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}:
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def soong_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SoongEnv:
    """A private home (``SOONG_AGENT_HOME``) and project under ``tmp_path``; no config written yet."""
    home = (tmp_path / "home").resolve()
    project = (tmp_path / "project").resolve()
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("SOONG_AGENT_HOME", str(home))
    return SoongEnv(home=home, project=project)
