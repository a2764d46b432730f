"""No import cycle between files of ``agent_core`` and no room over 20% of the lines (issue 15).

Uses ``scripts/architecture_report.py`` (the figures of the architecture pass). Imports under
``if TYPE_CHECKING:`` count: they never run, but they are a dependency all the same.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.fixtures.architecture import architecture_figures, architecture_report

MAX_ROOM_SHARE = 20.0


@pytest.fixture(scope="module")
def arch() -> ModuleType:
    return architecture_report()


@pytest.fixture(scope="module")
def figures(arch: ModuleType) -> dict[str, object]:
    return architecture_figures(type_checking=True)


def test_no_file_level_import_cycle(figures: dict[str, object]) -> None:
    cycles = figures["cycles"]
    assert isinstance(cycles, list)
    assert cycles == [], "import cycles between files:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_room_over_a_fifth_of_the_package(figures: dict[str, object]) -> None:
    largest = figures["largest_room"]
    assert isinstance(largest, tuple)
    room, lines, share = largest
    assert share <= MAX_ROOM_SHARE, f"room {room!r} holds {share}% of the package ({lines} lines)"


def test_the_check_sees_cycles_through_type_checking_and_lazy_imports(
    arch: ModuleType, tmp_path: Path
) -> None:
    """The detector itself: a TYPE_CHECKING-only cycle and a cycle through a function-level import."""
    package = tmp_path / "agent_core"
    (package / "room").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "room" / "__init__.py").write_text("")
    (package / "room" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agent_core.room.b import B\n"
    )
    (package / "room" / "b.py").write_text("from agent_core.room import a\nclass B: ...\n")
    (package / "c.py").write_text("def f():\n    from .d import g\n")
    (package / "d.py").write_text("from agent_core.c import f\ndef g(): ...\n")
    (package / "e.py").write_text("from agent_core.room.b import B\n")  # imports into a cycle, not part of it

    assert sorted(arch.report(type_checking=True, src=tmp_path)["cycles"]) == [
        ["agent_core.c", "agent_core.d"],
        ["agent_core.room.a", "agent_core.room.b"],
    ]
    assert arch.report(type_checking=False, src=tmp_path)["cycles"] == [["agent_core.c", "agent_core.d"]]
