"""The Memory Writer: confinement, atomic commits with rollback, secret rejection
(docs/context.md#extraction)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agent_core._memory.writer as writer_module
from agent_core._memory.sensitive import find_secret, mask_secrets
from agent_core._memory.writer import MemoryWriter
from agent_core._redaction import Redactor
from agent_core.errors import AgentCoreError, ErrorCode
from tests.fixtures.env import SoongEnv

SECRET = "sk-test-0123456789abcdef0123"


def _writer(env: SoongEnv, monkeypatch: pytest.MonkeyPatch | None = None) -> MemoryWriter:
    if monkeypatch is not None:
        monkeypatch.setenv("SOONG_TEST_API_KEY", SECRET)
    return MemoryWriter(env.home / "memory", redactor=Redactor({"SOONG_TEST_API_KEY"}))


def _files(root: Path) -> set[str]:
    return (
        {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} if root.exists() else set()
    )


def test_writes_inside_the_memory_dir_succeed(soong_env: SoongEnv) -> None:
    """Case M7."""
    writer = _writer(soong_env)
    written = writer.commit(
        [
            ("user/a.md", "user note\n"),
            ("feedback/b.md", "feedback note\n"),
            (soong_env.home / "memory" / "reference" / "c.md", "reference note\n"),
            ("MEMORY.md", "# Memory Catalog\n"),
        ]
    )
    assert [p.relative_to(soong_env.home / "memory").as_posix() for p in written] == [
        "user/a.md", "feedback/b.md", "reference/c.md", "MEMORY.md",
    ]  # fmt: skip
    assert (soong_env.home / "memory" / "feedback" / "b.md").read_text(encoding="utf-8") == "feedback note\n"
    assert _files(soong_env.home / "memory") == {"user/a.md", "feedback/b.md", "reference/c.md", "MEMORY.md"}


@pytest.mark.parametrize(
    "target",
    [
        "{project}/.soong-agent/memory/x.md",
        "{project}/README.md",
        "other/x.md",
        "../x.md",
        "user/../../x.md",
        "/etc/x.md",
        "{home}/x.md",
        "user/sub/x.md",
        "user/x.txt",
        "user/.hidden.md",
        "memory.md",
        "user",
    ],
)
def test_targets_outside_the_allowed_paths_are_rejected(soong_env: SoongEnv, target: str) -> None:
    """Case M7."""
    writer = _writer(soong_env)
    path = target.format(project=soong_env.project, home=soong_env.home)
    before = _files(soong_env.project) | _files(soong_env.home)
    with pytest.raises(AgentCoreError) as err:
        writer.commit([(path, "x\n")])
    assert err.value.code == ErrorCode.memory_write_failed
    assert _files(soong_env.project) | _files(soong_env.home) == before


def test_symlink_escapes_are_rejected(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case M7."""
    memory = soong_env.home / "memory"
    (memory / "feedback").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    # a category directory that is a symlink
    os.symlink(outside, memory / "user")
    # a target file that is a symlink
    victim = soong_env.project / "victim.md"
    victim.write_text("original\n", encoding="utf-8")
    os.symlink(victim, memory / "feedback" / "link.md")
    writer = _writer(soong_env)
    for target in ("user/a.md", "feedback/link.md"):
        with pytest.raises(AgentCoreError) as err:
            writer.commit([(target, "x\n")])
        assert err.value.code == ErrorCode.memory_write_failed
    assert list(outside.iterdir()) == []
    assert victim.read_text(encoding="utf-8") == "original\n"


def test_symlinked_memory_dir_is_rejected(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case M7."""
    outside = tmp_path / "fake-memory"
    outside.mkdir()
    os.symlink(outside, soong_env.home / "memory")
    with pytest.raises(AgentCoreError) as err:
        _writer(soong_env).commit([("MEMORY.md", "# Memory Catalog\n")])
    assert err.value.code == ErrorCode.memory_write_failed
    assert list(outside.iterdir()) == []


def test_commit_failure_on_second_file_restores_everything(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _writer(soong_env)
    writer.commit([("user/a.md", "old a\n"), ("MEMORY.md", "old catalog\n")])
    memory = soong_env.home / "memory"
    calls = {"n": 0}
    real_replace = os.replace

    def failing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("injected failure")
        real_replace(src, dst)

    monkeypatch.setattr(writer_module, "_replace", failing_replace)
    with pytest.raises(AgentCoreError) as err:
        writer.commit([("user/a.md", "new a\n"), ("user/b.md", "new b\n"), ("MEMORY.md", "new catalog\n")])
    assert err.value.code == ErrorCode.memory_write_failed
    assert "new" not in str(err.value.message)
    assert (memory / "user" / "a.md").read_text(encoding="utf-8") == "old a\n"
    assert (memory / "MEMORY.md").read_text(encoding="utf-8") == "old catalog\n"
    assert _files(memory) == {"user/a.md", "MEMORY.md"}  # no temp or backup files left behind


def test_secret_content_is_rejected_not_redacted(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case M18."""
    writer = _writer(soong_env, monkeypatch)
    for text in (
        f"my key is {SECRET}",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----",
        "use password=hunter22 to log in",
        "token ghp_" + "a" * 36,
        "AKIA" + "B" * 16,
    ):
        with pytest.raises(AgentCoreError) as err:
            writer.commit([("user/a.md", text), ("MEMORY.md", "# Memory Catalog\n")])
        assert err.value.code == ErrorCode.memory_write_failed
        assert SECRET not in err.value.message and "hunter22" not in err.value.message
    assert _files(soong_env.home / "memory") == set()


def test_secret_detection_labels_and_masking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", SECRET)
    redactor = Redactor({"SOONG_TEST_API_KEY"})
    assert find_secret(f"x {SECRET} y", redactor) == "value of a secret environment variable"
    assert find_secret("prefers tabs over spaces; always run pytest", redactor) is None
    assert find_secret("the password policy requires 12 characters", redactor) is None
    masked = mask_secrets(f"pwd={SECRET} and secret=abcdef", redactor)
    assert SECRET not in masked and "abcdef" not in masked
