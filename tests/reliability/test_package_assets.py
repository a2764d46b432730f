"""Packaged resources live at ``agent_core/assets/`` and ship in the wheel and the sdist (issue 31 item 19).

``agent_core/assets/`` is a data directory (prompts, templates, built-in agent definitions), not a module:
its loader is the private ``agent_core._asset_loader``. The built distributions must carry all 16 files at
that path, or an installed package cannot start (``AssetLoader.verify_all``).
"""

from __future__ import annotations

import tarfile
import zipfile
from importlib import resources
from pathlib import Path

from hatchling.builders.sdist import SdistBuilder
from hatchling.builders.wheel import WheelBuilder

from agent_core._asset_loader import ASSET_PATHS, CONFIG_TEMPLATE_ID, AssetLoader

REPO = Path(__file__).resolve().parents[2]
EXPECTED = sorted(f"agent_core/assets/{resource}" for resource in ASSET_PATHS.values())


def test_assets_are_a_data_directory_at_the_public_path() -> None:
    """Case I19."""
    root = REPO / "src" / "agent_core" / "assets"
    assert (root / "templates" / "config_default.toml").is_file()
    assert (
        sorted(f"agent_core/assets/{p.relative_to(root).as_posix()}" for p in root.rglob("*.*")) == EXPECTED
    )
    assert not list(root.rglob("*.py")), "assets/ holds data only; the loader is agent_core._asset_loader"
    loaded = AssetLoader().load(CONFIG_TEMPLATE_ID)
    assert loaded.resource == "templates/config_default.toml"
    packaged = resources.files("agent_core").joinpath("assets/templates/config_default.toml")
    assert loaded.text == packaged.read_text(encoding="utf-8")
    assert len(AssetLoader().verify_all()) == 16


def test_wheel_and_sdist_carry_every_asset(tmp_path: Path) -> None:
    """Case I19."""
    (wheel,) = WheelBuilder(str(REPO)).build(directory=str(tmp_path), versions=["standard"])
    (sdist,) = SdistBuilder(str(REPO)).build(directory=str(tmp_path), versions=["standard"])
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = sorted(n for n in archive.namelist() if n.startswith("agent_core/assets/"))
        assert "agent_core/_asset_loader.py" in archive.namelist()
    assert in_wheel == EXPECTED
    with tarfile.open(sdist) as archive:
        prefix = archive.getnames()[0].split("/")[0] + "/src/"
        in_sdist = sorted(
            n.removeprefix(prefix) for n in archive.getnames() if n.startswith(prefix + "agent_core/assets/")
        )
    assert [n for n in in_sdist if "." in n.rsplit("/", 1)[-1]] == EXPECTED
