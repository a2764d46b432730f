"""The project's surfaces use the public API only (issue 35 item 4).

``scripts/architecture_report.py`` reads the source: no module outside ``_api/`` reads a private attribute
of ``AgentRuntime`` / ``RunHandle`` (``runtime._manager``, ``._config``, ``._open()`` ...); ``server/``,
``cli/``, ``adapters/`` and ``engine/`` read no private attribute of another object (a detector's
``._last`` ...); ``server/``, ``cli/`` and ``adapters/`` import no private module of another room
(``agent_core._api``, ``._runtime``, ``._storage``, ``types._results`` ...). What they need is public API
of the SDK.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.fixtures.architecture import architecture_figures, architecture_report


@pytest.fixture(scope="module")
def arch() -> ModuleType:
    return architecture_report()


@pytest.fixture(scope="module")
def figures(arch: ModuleType) -> dict[str, object]:
    return architecture_figures(type_checking=False)


def test_no_runtime_internals_outside_api(figures: dict[str, object]) -> None:
    assert figures["runtime_private"] == []


def test_surfaces_read_no_private_attribute_of_another_object(figures: dict[str, object]) -> None:
    assert figures["surface_private"] == []


def test_server_and_cli_import_only_public_modules(figures: dict[str, object]) -> None:
    assert figures["client_imports"] == []


def test_the_scan_finds_what_it_forbids(arch: ModuleType, tmp_path: Path) -> None:
    """The checks are not vacuous: the accesses the issue named are found in a copy of the sources."""
    src = tmp_path / "src"
    package = src / "agent_core"
    (package / "_api").mkdir(parents=True)
    real = Path(arch.ROOT) / "agent_core" / "_api"
    for name in ("runtime.py", "handles.py"):
        (package / "_api" / name).write_text((real / name).read_text(encoding="utf-8"), encoding="utf-8")
    (package / "server").mkdir()
    (package / "server" / "_state.py").write_text(
        "from agent_core._runtime.state import RunState\n"
        "def f(runtime, r):\n"
        "    return runtime._manager, runtime._config, r._last\n",
        encoding="utf-8",
    )
    (package / "adapters").mkdir()
    (package / "adapters" / "acp.py").write_text(
        "from agent_core._api.runtime import AgentRuntime\n"
        "from agent_core.adapters._updates import Update\n"
        "def h(run):\n"
        "    return run._state\n",
        encoding="utf-8",
    )
    (package / "_tasks").mkdir()
    (package / "_tasks" / "x.py").write_text("async def g(rt):\n    await rt._open()\n", encoding="utf-8")
    found = arch.boundary(src)
    assert sorted(found["runtime_private"]) == [
        "_tasks/x.py:2 rt._open",
        "adapters/acp.py:4 run._state",
        "server/_state.py:3 runtime._config",
        "server/_state.py:3 runtime._manager",
    ]
    assert len(found["surface_private"]) == 4  # the detector's _last too
    assert sorted(found["client_imports"]) == [
        "adapters/acp.py:1 agent_core._api.runtime",  # an adapter's own private modules are its own
        "server/_state.py:1 agent_core._runtime.state",
    ]
