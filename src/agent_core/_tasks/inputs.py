"""Validated inputs of the ``agent.task_*`` tools and the ``agent.task_update`` patch operations.

Every model forbids unknown keys, so model-supplied actor fields (``actor_agent_id`` ...) and step ordering
fields (``priority``, ``order``, ``reorder``) are rejected with ``validation_error``
(docs/task-board.md#task-tools, docs/task-board.md#data-model). The patch operations are a discriminated union
on ``op`` (docs/task-board.md#agenttask_update-operations); the operations stored in a ``task_updated`` record
are re-validated with :data:`operation_adapter` on replay.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError, model_validator

from agent_core._tasks.models import NonEmptyStr, TaskIdStr
from agent_core._tasks.tool_definitions import MAX_OPERATIONS, MAX_PAGE
from agent_core.errors import ErrorCode, InvalidArgumentError
from agent_core.types.base import StrictModel
from agent_core.types.enums import StepStatus, TaskStatus

PoolIdStr = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,128}$")]
M = TypeVar("M", bound=StrictModel)


def dedupe(ids: list[str]) -> list[str]:
    """Drops repeated ids, keeping the first occurrence order."""
    return list(dict.fromkeys(ids))


class StepInput(StrictModel):
    """A new step (``task_create.steps[]``, ``add_step.step``); ``depends_on_step_ids`` is required."""

    step_id: TaskIdStr
    title: NonEmptyStr
    summary: NonEmptyStr
    depends_on_step_ids: list[TaskIdStr]
    required: bool = True
    worker_pool_id: PoolIdStr | None = None


# --------------------------------------------------------------------------------------------------
# task_update operations
# --------------------------------------------------------------------------------------------------


class UpdateTaskOp(StrictModel):
    op: Literal["update_task"]
    title: NonEmptyStr | None = None
    summary: NonEmptyStr | None = None
    status: Literal["blocked", "pending"] | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _some_field(self) -> UpdateTaskOp:
        if self.title is None and self.summary is None and self.status is None:
            raise ValueError("update_task needs at least one of title, summary, status")
        return self


class AddStepOp(StrictModel):
    op: Literal["add_step"]
    step: StepInput
    step_id: TaskIdStr | None = None
    required: bool | None = None
    worker_pool_id: PoolIdStr | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> AddStepOp:
        if self.step_id is not None and self.step_id != self.step.step_id:
            raise ValueError("op-level step_id must equal step.step_id")
        inner = self.step.model_fields_set
        if self.required is not None and "required" in inner and self.required != self.step.required:
            raise ValueError("conflicting values for required")
        if (
            self.worker_pool_id is not None
            and "worker_pool_id" in inner
            and self.worker_pool_id != self.step.worker_pool_id
        ):
            raise ValueError("conflicting values for worker_pool_id")
        return self

    def effective_required(self) -> bool:
        return self.required if self.required is not None else self.step.required

    def effective_pool(self) -> str | None:
        return self.worker_pool_id if self.worker_pool_id is not None else self.step.worker_pool_id


class StepFields(StrictModel):
    title: NonEmptyStr | None = None
    summary: NonEmptyStr | None = None
    depends_on_step_ids: list[TaskIdStr] | None = None
    required: bool | None = None
    worker_pool_id: PoolIdStr | None = None

    @model_validator(mode="after")
    def _non_empty(self) -> StepFields:
        if not self.model_fields_set:
            raise ValueError("fields must not be empty")
        if "required" in self.model_fields_set and self.required is None:
            raise ValueError("required must be a boolean")
        for name in ("title", "summary", "depends_on_step_ids"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} must not be null")
        return self

    @property
    def touches_scheduling(self) -> bool:
        """True when a field that is frozen for completed/cancelled steps is present."""
        return bool(self.model_fields_set & {"depends_on_step_ids", "required", "worker_pool_id"})


class UpdateStepOp(StrictModel):
    op: Literal["update_step"]
    step_id: TaskIdStr
    fields: StepFields
    reason: str | None = None


class DeleteStepOp(StrictModel):
    op: Literal["delete_step"]
    step_id: TaskIdStr
    reason: str | None = None


class AddDependencyOp(StrictModel):
    op: Literal["add_dependency"]
    step_id: TaskIdStr
    depends_on_step_id: TaskIdStr
    reason: str | None = None


class RemoveDependencyOp(StrictModel):
    op: Literal["remove_dependency"]
    step_id: TaskIdStr
    depends_on_step_id: TaskIdStr
    reason: str | None = None


class CancelStepOp(StrictModel):
    op: Literal["cancel_step"]
    step_id: TaskIdStr
    reason: str | None = None


class ReopenStepOp(StrictModel):
    op: Literal["reopen_step"]
    step_id: TaskIdStr
    reason: str | None = None


TaskOperation = Annotated[
    UpdateTaskOp
    | AddStepOp
    | UpdateStepOp
    | DeleteStepOp
    | AddDependencyOp
    | RemoveDependencyOp
    | CancelStepOp
    | ReopenStepOp,
    Field(discriminator="op"),
]
operation_adapter: TypeAdapter[TaskOperation] = TypeAdapter(
    TaskOperation, config=ConfigDict(defer_build=True)
)


# --------------------------------------------------------------------------------------------------
# Tool inputs
# --------------------------------------------------------------------------------------------------


class TaskTemplateInput(StrictModel):
    goal: str | None = None


class TaskCreateInput(StrictModel):
    task_id: TaskIdStr
    wal_name: str
    title: NonEmptyStr
    summary: NonEmptyStr
    steps: list[StepInput] = Field(min_length=1)


class TaskGetInput(StrictModel):
    task_id: TaskIdStr
    include_terminal_steps: bool = False


class TaskListInput(StrictModel):
    status: TaskStatus | None = None
    include_terminal: bool = False
    limit: int = Field(default=50, ge=1, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0)


class TaskUpdateInput(StrictModel):
    task_id: TaskIdStr
    operations: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_OPERATIONS)

    def parsed_operations(self) -> list[TaskOperation]:
        """Validates every operation; the error names the failing op index (``details.op_index``)."""
        parsed: list[TaskOperation] = []
        for index, raw in enumerate(self.operations):
            try:
                parsed.append(operation_adapter.validate_python(raw))
            except ValidationError as exc:
                raise InvalidArgumentError(
                    ErrorCode.validation_error,
                    f"operation {index} is invalid: {_first_error(exc)}",
                    details={"op_index": index, "errors": validation_errors(exc)},
                ) from exc
        return parsed


class TaskQueryStepsInput(StrictModel):
    task_id: TaskIdStr
    statuses: list[StepStatus] | None = None
    worker_pool_id: PoolIdStr | None = None
    claimed_by_agent_id: str | None = None
    include_terminal_steps: bool = False
    limit: int | None = Field(default=None, ge=1, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0)


class TaskClaimStepInput(StrictModel):
    task_id: TaskIdStr
    step_id: TaskIdStr


class TaskUpdateStepInput(StrictModel):
    task_id: TaskIdStr
    step_id: TaskIdStr
    status: StepStatus | None = None
    result_summary: str | None = None
    artifact_ids: list[str] | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _something(self) -> TaskUpdateStepInput:
        if self.status is None and self.result_summary is None and self.artifact_ids is None:
            raise ValueError("at least one of status, result_summary, artifact_ids is required")
        if self.status == StepStatus.ready:
            raise ValueError('status "ready" is set by core only and is never accepted')
        return self


class TaskCompleteInput(StrictModel):
    task_id: TaskIdStr
    result_summary: str | None = None


class TaskTerminateInput(StrictModel):
    """Input of ``agent.task_fail`` and ``agent.task_cancel``."""

    task_id: TaskIdStr
    reason: str | None = None


def validation_errors(exc: ValidationError) -> list[dict[str, str]]:
    """``details.errors`` entries ``{path, message}`` (docs/tools.md#input-schemas)."""
    return [
        {"path": "/".join(str(p) for p in err["loc"]), "message": err["msg"]} for err in exc.errors()[:20]
    ]


def _first_error(exc: ValidationError) -> str:
    errors = validation_errors(exc)
    if not errors:
        return "invalid input"
    first = errors[0]
    return f"{first['path']}: {first['message']}" if first["path"] else first["message"]


def parse_input(model: type[M], arguments: dict[str, Any]) -> M:
    """Validates tool arguments (top-level ``null`` values stripped) into ``model`` or raises
    ``validation_error`` with ``details.errors``."""
    cleaned = {k: v for k, v in arguments.items() if v is not None}
    try:
        return model.model_validate(cleaned)
    except ValidationError as exc:
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            f"invalid arguments: {_first_error(exc)}",
            details={"errors": validation_errors(exc)},
        ) from exc
