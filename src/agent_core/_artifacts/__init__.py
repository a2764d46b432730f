"""Artifacts: the file store + registry, automatic artifactisation and cleanup (docs/storage.md#artifacts,
docs/storage.md#deleting-and-cleaning-up).

Task WAL cleanup lives in :mod:`agent_core._tasks.wal_cleanup`.
"""

from agent_core._artifacts.artifactize import (
    artifactize_json_block,
    compact_json,
    estimate_tokens,
    json_summary,
    should_artifactize,
)
from agent_core._artifacts.cleanup import (
    ARTIFACT_KINDS,
    DEBUG_KINDS,
    ORDINARY_KINDS,
    cleanup_artifacts,
)
from agent_core._artifacts.manager import ArtifactManager, sanitize_filename

__all__ = [
    "ARTIFACT_KINDS",
    "DEBUG_KINDS",
    "ORDINARY_KINDS",
    "ArtifactManager",
    "artifactize_json_block",
    "cleanup_artifacts",
    "compact_json",
    "estimate_tokens",
    "json_summary",
    "sanitize_filename",
    "should_artifactize",
]
