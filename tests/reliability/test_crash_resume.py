"""Crash-safe resume (issue 10 item 1): seeded SIGKILLs of a working child, each followed by a resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.env import SoongEnv
from tests.reliability.crash_harness import crash_campaign


async def run_campaign(soong_env: SoongEnv, tmp_path: Path, kills: int, seed: int) -> None:
    workdir = tmp_path / "harness"
    workdir.mkdir()
    stats = await crash_campaign(soong_env, workdir, kills=kills, seed=seed, max_delay_s=0.6)
    (workdir / "figures.json").write_text(json.dumps(stats.as_dict(), indent=2))
    print(json.dumps(stats.as_dict(), indent=2))
    assert stats.failures == []
    assert stats.kills == stats.survived == kills
    assert stats.provider_requests_checked >= kills


@pytest.mark.timeout(120)
async def test_crash_resume_short(soong_env: SoongEnv, tmp_path: Path) -> None:
    await run_campaign(soong_env, tmp_path, kills=10, seed=1010)


@pytest.mark.slow
@pytest.mark.timeout(3600)
async def test_crash_resume_200_kills(soong_env: SoongEnv, tmp_path: Path) -> None:
    await run_campaign(soong_env, tmp_path, kills=200, seed=20260612)
