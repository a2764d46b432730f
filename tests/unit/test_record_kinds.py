"""One way to declare a record (issue 35 item 2): stdlib ``@dataclass(slots=True, ...)`` inside the
package, pydantic models at its boundaries. Counted by ``scripts/architecture_report.py`` over the whole
package (the event payloads are slotted stdlib dataclasses in ``agent_core.types.events``).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.fixtures.architecture import architecture_report


@pytest.fixture(scope="module")
def arch() -> ModuleType:
    return architecture_report()


def test_records_are_slotted_stdlib_dataclasses_or_pydantic_models(arch: ModuleType) -> None:
    kinds = arch.record_kinds()
    assert sorted(kinds) == ["pydantic model", "stdlib dataclass"], kinds


def test_the_counter_tells_the_kinds_apart(arch: ModuleType, tmp_path: Path) -> None:
    package = tmp_path / "agent_core"
    package.mkdir()
    (package / "a.py").write_text(
        "import dataclasses\n"
        "from dataclasses import dataclass\n"
        "from pydantic import BaseModel\n"
        "from agent_core._events._frozen import frozen_dataclass as lazy\n"
        "@dataclass(slots=True, frozen=True)\nclass A:\n    x: int\n"
        "@dataclasses.dataclass\nclass B:\n    x: int\n"
        "@lazy(kw_only=True)\nclass C:\n    x: int\n"
        "class M(BaseModel):\n    x: int\n"
        "class N(M):\n    y: int\n",
        encoding="utf-8",
    )
    assert arch.record_kinds(tmp_path) == {
        "agent_core._events._frozen.frozen_dataclass": 1,
        "pydantic model": 2,
        "stdlib dataclass": 1,
        "stdlib dataclass without slots": 1,
    }
