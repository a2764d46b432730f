"""The closed set of error codes (docs/errors.md#codes); member name equals value."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    # Common
    validation_error = "validation_error"
    schema_error = "schema_error"
    config_error = "config_error"
    permission_denied = "permission_denied"
    tool_not_available = "tool_not_available"
    timeout = "timeout"
    cancelled = "cancelled"
    internal_error = "internal_error"
    # Provider
    provider_error = "provider_error"
    unsupported_capability = "unsupported_capability"
    provider_auth_failed = "provider_auth_failed"
    provider_rate_limited = "provider_rate_limited"
    provider_timeout = "provider_timeout"
    # Storage
    storage_error = "storage_error"
    migration_failed = "migration_failed"
    session_active = "session_active"
    path_conflict = "path_conflict"
    file_not_found = "file_not_found"
    text_not_found = "text_not_found"
    ambiguous_edit = "ambiguous_edit"
    patch_apply_failed = "patch_apply_failed"
    patch_path_mismatch = "patch_path_mismatch"
    write_outside_allowed_roots = "write_outside_allowed_roots"
    # Agent
    invalid_agent_definition = "invalid_agent_definition"
    duplicate_agent_definition = "duplicate_agent_definition"
    invalid_agent_override = "invalid_agent_override"
    child_agent_limit_exceeded = "child_agent_limit_exceeded"
    worker_busy = "worker_busy"
    worker_not_available = "worker_not_available"
    worker_pool_busy = "worker_pool_busy"
    # Task
    task_not_found = "task_not_found"
    task_terminal = "task_terminal"
    task_not_dispatchable = "task_not_dispatchable"
    dependency_cycle = "dependency_cycle"
    step_not_found = "step_not_found"
    step_not_ready = "step_not_ready"
    step_already_claimed = "step_already_claimed"
    step_already_claimed_by_run = "step_already_claimed_by_run"
    step_has_dependents = "step_has_dependents"
    no_step_claimed = "no_step_claimed"
    task_wal_unavailable = "task_wal_unavailable"
    # Memory / Skill
    memory_recall_failed = "memory_recall_failed"
    memory_write_failed = "memory_write_failed"
    skill_not_found = "skill_not_found"
    skill_load_failed = "skill_load_failed"
