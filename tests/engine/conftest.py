"""Fixtures of the temporal engine's tests: the dev server and in-process workers."""

from __future__ import annotations

pytest_plugins = ["tests.fixtures.temporal_server"]
