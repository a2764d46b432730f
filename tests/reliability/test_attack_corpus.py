"""Path and command attacks through the public runtime (issue 10 item 3): the whole corpus, 0 escapes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core import PermissionDecision, PermissionRequest, RunStatus
from agent_core.types.content import TextBlock, ToolResultBlock
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, text, tool_calls
from tests.fixtures.runtime import collect, db_bytes, open_runtime
from tests.reliability.attack_corpus import ATTACKS, LEAK, MARKER, SECRET, Attack, World

ROOT = Path(__file__).resolve().parents[2]
SENSITIVE_HOME_FILES = (".ssh/id_rsa", ".gnupg/x", ".aws/credentials", ".config/gcloud/x")
SENSITIVE_PROJECT_FILES = (".env", ".env.local", "k.pem", "deep/k.key")


class CarefulUser:
    """Follows the runtime's suggestion: allows in-root work, denies what it marks as dangerous."""

    def __init__(self) -> None:
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        return PermissionDecision(decision=request.suggested_decision)


def snapshot(*roots: Path) -> dict[str, tuple[bool, bytes | None]]:
    state: dict[str, tuple[bool, bytes | None]] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                content = p.read_bytes() if p.is_file() and not p.is_symlink() else None
                state[str(p)] = (p.is_symlink(), content)
    return state


@pytest.fixture
def world(soong_env: SoongEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    home = (tmp_path / "userhome").resolve()
    for rel in SENSITIVE_HOME_FILES:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"{MARKER} {LEAK}\n")
    (home / "notes.txt").write_text("plain home file\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SOONG_TEST_API_KEY", SECRET)
    w = World(
        root=tmp_path.resolve(), project=soong_env.project, outside=tmp_path.resolve() / "outside", home=home
    )
    w.outside.mkdir()
    (w.outside / "existing.txt").write_text("x\n")
    (w.root / "project2").mkdir()
    for rel in SENSITIVE_PROJECT_FILES:
        soong_env.write_project(rel, f"{MARKER} {LEAK}\n")
    soong_env.write_project("readme.txt", "nothing secret here\n")
    yield w


def result_text(block: ToolResultBlock) -> str:
    parts = []
    for item in block.content:
        parts.append(item.text if isinstance(item, TextBlock) else json.dumps(item.model_dump(mode="json")))
    return "\n".join(parts)


def check_outcome(
    attack: Attack, world: World, result: ToolResultBlock, asked: list[PermissionRequest]
) -> None:
    code = result.error.code.value if result.error else None
    kind, _, expected_code = attack.expect.partition(":")
    tool = attack.calls[-1][0]
    prompts = [r for r in asked if r.tool_name == tool]
    if kind == "denied":
        assert result.is_error and code == "permission_denied", (code, result_text(result))
        assert prompts and all(r.suggested_decision == "deny" for r in prompts), prompts
        assert prompts[-1].target_scope, "the prompt must name the resolved target"
    elif kind == "refused":
        assert result.is_error and code == expected_code, (code, result_text(result))
        assert not prompts, f"{attack.id} prompted before the hard refusal"
    elif kind == "fails":
        assert result.is_error and code == expected_code, (code, result_text(result))
    elif kind == "ok":
        assert not result.is_error, (code, result_text(result))
    elif kind == "error":
        assert result.is_error and result.error is not None
    else:  # pragma: no cover - table typo
        raise AssertionError(attack.expect)
    if attack.check is not None:
        attack.check(world, result_text(result))


async def test_attack_corpus_has_no_escape(soong_env: SoongEnv, world: World) -> None:
    assert len(ATTACKS) >= 60 and len({a.id for a in ATTACKS}) == len(ATTACKS)
    user = CarefulUser()
    current: dict[str, Any] = {}

    def route(request: ModelRequest) -> Turn:
        run_id = request.metadata["run_id"]
        if current.get("run_id") != run_id:
            current["run_id"] = run_id
            return tool_calls(*current["calls"])
        return text("noted")

    fake = FakeProvider(strict=False).route(route)
    outside_roots = [world.outside, world.root / "project2", world.home]
    before = snapshot(*outside_roots)
    cwd_marker = ROOT / "soong-attack-cwd.txt"
    outcomes: dict[str, str] = {}
    config = {"model": {"context_window": 200_000}, "compact": {"enabled": False}}
    async with open_runtime(soong_env, fake, config=config, permission_callback=user) as rt:
        for attack in ATTACKS:
            attack.setup(world)
            current["calls"] = [(tool, args(world)) for tool, args in attack.calls]
            asked_before = len(user.requests)
            run = await rt.start(f"attack {attack.id}")
            await collect(run, timeout=20)
            assert run.status == RunStatus.completed, (attack.id, run.error)
            results = [
                b for m in fake.requests[-1].messages for b in m.content if isinstance(b, ToolResultBlock)
            ]
            result = results[-1]
            try:
                check_outcome(attack, world, result, user.requests[asked_before:])
            except AssertionError as exc:
                outcomes[attack.id] = f"unexpected outcome: {exc}"
            assert snapshot(*outside_roots) == before, f"{attack.id} changed a file outside the project"
            assert not cwd_marker.exists(), f"{attack.id} wrote into the process cwd"
            assert not Path("/etc/soong-agent-attack").exists() and not Path("/etc/soong-attack").exists()
    requests = json.dumps([r.model_dump(mode="json") for r in fake.requests])
    assert LEAK not in requests and SECRET not in requests, "sensitive content reached the model"
    stored = db_bytes(soong_env)
    assert LEAK.encode() not in stored and SECRET.encode() not in stored
    for artifact in (soong_env.home / "sessions").rglob("*"):
        if artifact.is_file():
            data = artifact.read_bytes()
            assert LEAK.encode() not in data and SECRET.encode() not in data, artifact
    assert not (soong_env.project / "pwned").exists()
    assert not any(p.name == "pwned" for p in world.root.rglob("pwned")), "a shell payload ran"
    assert outcomes == {}
