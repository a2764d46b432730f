"""Error codes, the exception tree and the shared enums (docs/errors.md#codes,
docs/architecture.md#type-layers, docs/errors.md)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from enum import StrEnum

import pytest

from agent_core._ids import new_id, validate_id
from agent_core._redaction import REDACTED, Redactor
from agent_core.errors import (
    AgentCoreError,
    ConfigError,
    ErrorCode,
    PermissionDeniedError,
    ProviderError,
    SchemaError,
    StorageError,
    ToolError,
)
from agent_core.types import enums

CONTRACT_CODES = """
validation_error schema_error config_error permission_denied tool_not_available timeout cancelled internal_error
provider_error unsupported_capability provider_auth_failed provider_rate_limited provider_timeout
storage_error migration_failed session_active path_conflict file_not_found text_not_found ambiguous_edit
patch_apply_failed patch_path_mismatch write_outside_allowed_roots
invalid_agent_definition duplicate_agent_definition invalid_agent_override child_agent_limit_exceeded
worker_busy worker_not_available worker_pool_busy
task_not_found task_terminal task_not_dispatchable dependency_cycle step_not_found step_not_ready
step_already_claimed step_already_claimed_by_run step_has_dependents no_step_claimed task_wal_unavailable
memory_recall_failed memory_write_failed skill_not_found skill_load_failed
""".split()


def test_error_codes_exactly_45() -> None:
    """Case A4."""
    assert len(CONTRACT_CODES) == 45
    assert {e.value for e in ErrorCode} == set(CONTRACT_CODES)
    assert all(e.name == e.value for e in ErrorCode)
    assert ErrorCode("no_step_claimed") is ErrorCode.no_step_claimed


def test_error_payload_is_redacted_without_traceback() -> None:
    payload = AgentCoreError(ErrorCode.timeout, "x").to_payload()
    assert payload.code == "timeout"
    assert payload.type == "timeout"
    assert payload.retryable is False
    assert payload.details == {}
    assert payload.redacted is True
    assert "Traceback" not in payload.model_dump_json()


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (ConfigError, ErrorCode.config_error),
        (ProviderError, ErrorCode.provider_error),
        (ToolError, ErrorCode.internal_error),
        (StorageError, ErrorCode.storage_error),
        (SchemaError, ErrorCode.schema_error),
        (PermissionDeniedError, ErrorCode.permission_denied),
    ],
)
def test_exception_tree_defaults(cls: type[AgentCoreError], code: ErrorCode) -> None:
    assert issubclass(cls, AgentCoreError)
    assert not issubclass(cls, PermissionError)
    err = cls(None, "boom")
    assert err.code == code
    assert cls(ErrorCode.timeout, "t").code == ErrorCode.timeout


def test_error_cause_and_secret_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", "sk-test-abcdef123456")
    cause = ValueError("inner")
    err = AgentCoreError(
        ErrorCode.provider_error,
        "bad key sk-test-abcdef123456",
        details={"k": "sk-test-abcdef123456"},
        cause=cause,
    )
    assert err.__cause__ is cause
    payload = err.to_payload(Redactor(["SOONG_TEST_API_KEY"]))
    assert "sk-test-abcdef123456" not in payload.model_dump_json()
    assert REDACTED in payload.message


def test_runtime_enums_are_strenums() -> None:
    assert issubclass(enums.RunStatus, StrEnum)
    assert issubclass(enums.EndReason, StrEnum)
    assert issubclass(enums.EventType, StrEnum)
    assert enums.RunStatus.completed == "completed"
    assert [e.value for e in enums.RunStatus] == [
        "queued",
        "pending",
        "running",
        "completed",
        "failed",
        "aborted",
        "cancelled",
    ]
    assert [e.value for e in enums.EndReason] == [
        "completed",
        "max_turns",
        "aborted_streaming",
        "aborted_tools",
        "prompt_too_long",
        "max_output_tokens_recovery",
        "failed",
        "limit_reached",  # docs/runs.md#limits
        "loop_detected",
    ]
    assert [e.value for e in enums.StepStatus] == [
        "pending",
        "ready",
        "claimed",
        "running",
        "blocked",
        "completed",
        "failed",
        "cancelled",
    ]
    # docs/jobs-and-schedules.md#background-jobs (issue 22)
    v2_jobs = {"job_started", "job_completed", "job_failed"}
    assert v2_jobs <= {e.value for e in enums.EventType}
    cache = {"prompt_cache_break"}  # issue 33: a request that stopped repeating the previous one
    assert cache <= {e.value for e in enums.EventType}
    status = {enums.EventType.model_progress}  # issue 32: the live status line of a model call
    assert status <= enums.TRANSIENT_EVENTS
    models = {"reasoning_delta", "model_fallback", "context_overflow"}  # issue 34: real models
    assert models <= {e.value for e in enums.EventType}
    assert enums.EventType.reasoning_delta in enums.TRANSIENT_EVENTS
    teams = {"inbox_delivered", "inbox_drained", "teammate_spawned", "teammate_stopped"}  # issue 36
    assert teams <= {e.value for e in enums.EventType}
    assert len(enums.EventType) == 70 + len(v2_jobs) + len(cache) + len(status) + len(teams) + len(models)
    assert len(enums.WAL_EVENT_TYPES) == 17


def test_ids() -> None:
    assert re.match(r"^run_\d{8}_\d{6}_[0-9a-f]{12}$", new_id("run_"))
    assert re.match(r"^sess_[A-Za-z0-9_]+$", new_id("sess_"))
    with pytest.raises(AgentCoreError) as info:
        validate_id("run_x/../y", "run_")
    assert info.value.code == ErrorCode.validation_error
    with pytest.raises(AgentCoreError):
        validate_id("x; DROP TABLE sessions", "")
    assert validate_id("run_abc", "run_") == "run_abc"


def test_logging_null_handler_and_no_structlog() -> None:
    import agent_core  # noqa: F401

    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("agent_core").handlers)
    out = subprocess.run(
        [sys.executable, "-c", "import sys, agent_core; print('structlog' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
