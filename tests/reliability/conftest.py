"""The reliability suite (issue 10): every test here carries the ``reliability`` marker.

The long parts are also marked ``slow`` (excluded by default); the short subset runs in the default suite.
``scripts/test.sh -m reliability`` runs the whole suite (the explicit ``-m`` replaces the default filter).
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks this directory's tests before ``-m`` deselection runs."""
    for item in items:
        if Path(str(item.path)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.reliability)
