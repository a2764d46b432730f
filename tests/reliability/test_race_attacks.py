"""Check/use races (issue 14 item 1): the target is swapped for a symlink while the permission prompt is open.

The permission callback plays the attacker's accomplice: it answers ``allow_once`` for the harmless-looking
target it was shown, after replacing that target (or a parent directory) with a symlink to a secret or to a
place outside the project. The tool must act on what was checked: refuse with ``path_conflict`` (or re-ask),
never read the secret, never write through the new link.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_core import PermissionDecision, PermissionRequest, RunStatus
from agent_core.types.content import TextBlock, ToolResultBlock
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, text, tool_calls
from tests.fixtures.runtime import collect, db_bytes, open_runtime

MARKER = "RACE-MARKER-51c0"
LEAK = "race-leak-8e21f4"
DOTENV = "API_TOKEN=original\n"
ACCEPTED = ("path_conflict", "permission_denied", "write_outside_allowed_roots")
"""A refusal; ``write_outside_allowed_roots`` only for the two outside-roots swaps (r06, r08), which the
write-roots re-check already refused before issue 14 (kept as regression guards)."""


@dataclass
class RaceWorld:
    project: Path
    home: Path
    outside: Path


Swap = Callable[[RaceWorld], None]


def replace_with_link(rel: str, target: Callable[[RaceWorld], Path]) -> Swap:
    def swap(w: RaceWorld) -> None:
        path = w.project / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.symlink_to(target(w))

    return swap


class SwappingUser:
    """Allows the call it was shown, after performing the swap."""

    def __init__(self, swap: Swap, world: RaceWorld) -> None:
        self.swap = swap
        self.world = world
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        if len(self.requests) == 1:
            self.swap(self.world)
        return PermissionDecision(decision="allow_once")


@pytest.fixture
def race_world(soong_env: SoongEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RaceWorld:
    home = (tmp_path / "userhome").resolve()
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"{MARKER} {LEAK}\n")
    monkeypatch.setenv("HOME", str(home))
    outside = (tmp_path / "outside").resolve()
    outside.mkdir()
    project = soong_env.project
    (project / "notes.txt").write_text(f"{MARKER} harmless notes\n")
    (project / ".env").write_text(DOTENV)
    (project / "docs").mkdir()
    (project / "docs" / "a.txt").write_text(f"{MARKER} doc\n")
    return RaceWorld(project=project, home=home, outside=outside)


async def run_race(
    soong_env: SoongEnv, world: RaceWorld, call: tuple[str, dict[str, Any]], swap: Swap
) -> tuple[ToolResultBlock, FakeProvider, SwappingUser]:
    user = SwappingUser(swap, world)
    seen: dict[str, bool] = {}

    def route(request: ModelRequest) -> Turn:
        if not seen:
            seen["called"] = True
            return tool_calls(call)
        return text("done")

    fake = FakeProvider(strict=False).route(route)
    config = {"permissions": {"readonly_default": "confirm"}, "compact": {"enabled": False}}
    async with open_runtime(soong_env, fake, config=config, permission_callback=user) as rt:
        run = await rt.start("race")
        await collect(run, timeout=20)
        assert run.status == RunStatus.completed, run.error
    assert user.requests, "the call must have asked"
    results = [b for m in fake.requests[-1].messages for b in m.content if isinstance(b, ToolResultBlock)]
    return results[-1], fake, user


def no_leak(soong_env: SoongEnv, fake: FakeProvider) -> None:
    requests = json.dumps([r.model_dump(mode="json") for r in fake.requests])
    assert LEAK not in requests, "the swapped-in secret reached the model"
    assert LEAK.encode() not in db_bytes(soong_env), "the swapped-in secret reached SQLite"


def result_text(block: ToolResultBlock) -> str:
    return "\n".join(
        b.text if isinstance(b, TextBlock) else json.dumps(b.model_dump(mode="json")) for b in block.content
    )


def refused(block: ToolResultBlock) -> None:
    assert block.is_error and block.error is not None, result_text(block)
    assert block.error.code.value in ACCEPTED, result_text(block)


async def test_r01_read_file_swapped_to_ssh_key_during_prompt(
    soong_env: SoongEnv, race_world: RaceWorld
) -> None:
    swap = replace_with_link("notes.txt", lambda w: w.home / ".ssh" / "id_rsa")
    block, fake, _ = await run_race(soong_env, race_world, ("code.read_file", {"path": "notes.txt"}), swap)
    refused(block)
    no_leak(soong_env, fake)


async def test_r02_list_dir_swapped_to_ssh_dir_during_prompt(
    soong_env: SoongEnv, race_world: RaceWorld
) -> None:
    swap = replace_with_link("docs", lambda w: w.home / ".ssh")
    block, fake, _ = await run_race(soong_env, race_world, ("code.list_dir", {"path": "docs"}), swap)
    refused(block)
    assert "id_rsa" not in result_text(block)
    assert "id_rsa" not in json.dumps([r.model_dump(mode="json") for r in fake.requests])


async def test_r03_search_swapped_to_ssh_dir_during_prompt(
    soong_env: SoongEnv, race_world: RaceWorld
) -> None:
    swap = replace_with_link("docs", lambda w: w.home / ".ssh")
    call = ("code.search", {"query": MARKER, "path": "docs"})
    block, fake, _ = await run_race(soong_env, race_world, call, swap)
    refused(block)
    no_leak(soong_env, fake)


async def test_r04_search_file_swapped_to_ssh_key_during_prompt(
    soong_env: SoongEnv, race_world: RaceWorld
) -> None:
    swap = replace_with_link("notes.txt", lambda w: w.home / ".ssh" / "id_rsa")
    call = ("code.search", {"query": MARKER, "path": "notes.txt"})
    block, fake, _ = await run_race(soong_env, race_world, call, swap)
    refused(block)
    no_leak(soong_env, fake)


async def test_r05_write_file_swapped_to_dotenv_during_prompt(
    soong_env: SoongEnv, race_world: RaceWorld
) -> None:
    swap = replace_with_link("notes.txt", lambda w: w.project / ".env")
    call = ("code.write_file", {"path": "notes.txt", "content": "API_TOKEN=attacker\n", "overwrite": True})
    block, _, _ = await run_race(soong_env, race_world, call, swap)
    refused(block)
    assert (race_world.project / ".env").read_text() == DOTENV


async def test_r06_write_file_parent_swapped_outside_during_prompt(
    soong_env: SoongEnv, race_world: RaceWorld
) -> None:
    swap = replace_with_link("docs", lambda w: w.outside)
    call = ("code.write_file", {"path": "docs/new.txt", "content": "payload\n"})
    block, _, _ = await run_race(soong_env, race_world, call, swap)
    refused(block)
    assert list(race_world.outside.iterdir()) == []


async def test_r07_edit_file_swapped_to_dotenv_during_prompt(
    soong_env: SoongEnv, race_world: RaceWorld
) -> None:
    (race_world.project / "cfg.txt").write_text("API_TOKEN=original\n")
    swap = replace_with_link("cfg.txt", lambda w: w.project / ".env")
    edit = {"old": "original", "new": "attacker"}
    call = ("code.edit_file", {"path": "cfg.txt", "edits": [edit]})
    block, _, _ = await run_race(soong_env, race_world, call, swap)
    refused(block)
    assert (race_world.project / ".env").read_text() == DOTENV


async def test_r08_write_file_swapped_outside_roots_during_prompt(
    soong_env: SoongEnv, race_world: RaceWorld
) -> None:
    (race_world.outside / "victim.txt").write_text("keep\n")
    swap = replace_with_link("notes.txt", lambda w: w.outside / "victim.txt")
    call = ("code.write_file", {"path": "notes.txt", "content": "payload\n", "overwrite": True})
    block, _, _ = await run_race(soong_env, race_world, call, swap)
    refused(block)
    assert (race_world.outside / "victim.txt").read_text() == "keep\n"
    assert os.path.islink(race_world.project / "notes.txt") or (race_world.project / "notes.txt").exists()
