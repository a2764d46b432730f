"""Worker pools (docs/multi-agent.md#worker-pools): configured workers, reference validation and per-session
worker state.

* :class:`WorkerPools` is built from ``[[agents.worker_pools]]`` (structural errors already failed config
  loading). :meth:`WorkerPools.validate` runs the reference checks at every orchestrator run start, after
  code-registered AgentDefinitions exist: an empty ``workers`` list, an unknown or internal
  ``agent_definition_id``, or an ``allowed_tools`` entry that is not a registered tool (``mcp.<server>.*``
  names of catalogued servers count as registered until discovery) or is not permitted to the worker role
  makes the whole pool invalid. Invalid pools are excluded from listing and dispatch.
* Default pool: the valid pool ``"default"``, otherwise the first valid pool in config order.
* :class:`WorkerSlot` is one worker in one session: a deterministic ``agent_id`` derived from
  ``(session_id, pool_id, worker_id)``, its never-rendered root node and its current run. Status:
  ``busy`` while a dispatch is being admitted or its run is live, ``unavailable`` while a run keeps going
  after a cancel request or after its dispatch gave up waiting, ``idle`` otherwise. One run at a time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_core._agents.registry import INTERNAL_DEFINITIONS, AgentDefinitionRegistry
from agent_core._runtime.state import RunState
from agent_core.config.schema import Settings, WorkerSpec, worker_entries
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode, InvalidArgumentError
from agent_core.tools._effective import role_permits
from agent_core.types.enums import AgentRole
from agent_core.types.runtime import AgentDefinition, Node
from agent_core.types.tools import ToolDefinition

WorkerStatus = Literal["idle", "busy", "unavailable"]


def worker_agent_id(session_id: str, pool_id: str, worker_id: str) -> str:
    """The persisted ``agent_id`` of a worker in a session: stable across restarts
    (docs/multi-agent.md#worker-pools)."""
    digest = hashlib.sha256(f"{session_id}\x00{pool_id}\x00{worker_id}".encode()).hexdigest()
    return f"agent_worker_{digest[:24]}"


@dataclass(frozen=True, kw_only=True, slots=True)
class PoolProblem:
    """Why a configured pool is invalid (one entry per offending reference)."""

    pool_id: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def error(self) -> AgentCoreError:
        return ConfigError(
            ErrorCode.config_error,
            f"worker pool {self.pool_id!r} is invalid: {self.message}",
            details={"pool_id": self.pool_id, **self.details},
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class PoolWorker:
    """One configured worker of a valid pool, with its resolved AgentDefinition."""

    spec: WorkerSpec
    definition: AgentDefinition

    @property
    def pool_id(self) -> str:
        return self.spec.pool_id

    @property
    def worker_id(self) -> str:
        return self.spec.worker_id

    @property
    def ceiling(self) -> tuple[str, ...] | None:
        """The entry's ``allowed_tools`` (``None``: every tool permitted to the worker role)."""
        return self.spec.allowed_tools


class WorkerPools:
    """The configured pools and, after :meth:`validate`, the valid ones (config order)."""

    def __init__(self, settings: Settings) -> None:
        self._order = [pool.pool_id for pool in settings.agents.worker_pools]
        self._specs: dict[str, list[WorkerSpec]] = {pool_id: [] for pool_id in self._order}
        for spec in worker_entries(settings):
            self._specs[spec.pool_id].append(spec)
        self._valid: dict[str, list[PoolWorker]] = {}
        self.problems: list[PoolProblem] = []
        self.validated = False

    @property
    def configured_ids(self) -> list[str]:
        return list(self._order)

    def validate(
        self,
        definitions: AgentDefinitionRegistry,
        tools: Sequence[ToolDefinition],
        *,
        mcp_servers: Collection[str] = (),
    ) -> list[PoolProblem]:
        """Reference validation of every pool; returns the problems (also kept in :attr:`problems`)."""
        registered = {t.name for t in tools}
        valid: dict[str, list[PoolWorker]] = {}
        problems: list[PoolProblem] = []
        for pool_id in self._order:
            specs = self._specs[pool_id]
            pool_problems: list[PoolProblem] = []
            workers: list[PoolWorker] = []
            if not specs:
                pool_problems.append(PoolProblem(pool_id=pool_id, message="its workers list is empty"))
            for spec in specs:
                definition = definitions.get(spec.agent_definition_id)
                if definition is None or spec.agent_definition_id in INTERNAL_DEFINITIONS:
                    pool_problems.append(
                        PoolProblem(
                            pool_id=pool_id,
                            message=f"worker {spec.worker_id!r} references unknown or internal "
                            f"agent_definition_id {spec.agent_definition_id!r}",
                            details={
                                "worker_id": spec.worker_id,
                                "agent_definition_id": spec.agent_definition_id,
                            },
                        )
                    )
                    continue
                bad = _bad_tools(spec.allowed_tools or (), registered, mcp_servers)
                if bad:
                    pool_problems.append(
                        PoolProblem(
                            pool_id=pool_id,
                            message=f"worker {spec.worker_id!r} allowed_tools has unknown or non-worker "
                            f"tools: {', '.join(t for t, _ in bad)}",
                            details={
                                "worker_id": spec.worker_id,
                                "tools": [{"tool": t, "reason": r} for t, r in bad],
                            },
                        )
                    )
                    continue
                workers.append(PoolWorker(spec=spec, definition=definition))
            if pool_problems:
                problems.extend(pool_problems)
            else:
                valid[pool_id] = workers
        self._valid = valid
        self.problems = problems
        self.validated = True
        return problems

    def require_valid(self) -> None:
        """``config_error`` when no valid pool remains (orchestrator runs must not start)."""
        if self._valid:
            return
        if not self._order:
            raise ConfigError(
                ErrorCode.config_error,
                "orchestrator mode needs at least one worker pool ([[agents.worker_pools]]); none is configured",
            )
        raise ConfigError(
            ErrorCode.config_error,
            "orchestrator mode needs at least one valid worker pool; every configured pool is invalid",
            details={"problems": [{"pool_id": p.pool_id, "message": p.message} for p in self.problems]},
        )

    def valid_ids(self) -> list[str]:
        return [pool_id for pool_id in self._order if pool_id in self._valid]

    def default_pool_id(self) -> str | None:
        ids = self.valid_ids()
        if not ids:
            return None
        return "default" if "default" in ids else ids[0]

    def workers(self, pool_id: str) -> list[PoolWorker]:
        return list(self._valid.get(pool_id, []))

    def all_workers(self) -> list[PoolWorker]:
        return [w for pool_id in self.valid_ids() for w in self._valid[pool_id]]

    def resolve_pool(self, pool_id: str | None) -> str:
        """A valid pool id (``None`` → the default pool); unknown or invalid → ``validation_error``."""
        if pool_id is None:
            default = self.default_pool_id()
            if default is None:
                raise InvalidArgumentError(ErrorCode.validation_error, "no valid worker pool is configured")
            return default
        if pool_id not in self._valid:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"unknown or invalid worker_pool_id {pool_id!r}",
                details={"worker_pool_id": pool_id, "valid_pool_ids": self.valid_ids()},
            )
        return pool_id


def _bad_tools(
    names: Iterable[str], registered: Collection[str], mcp_servers: Collection[str]
) -> list[tuple[str, str]]:
    bad: list[tuple[str, str]] = []
    for name in dict.fromkeys(names):
        known = name in registered or (
            name.startswith("mcp.") and len(name.split(".")) > 2 and name.split(".")[1] in mcp_servers
        )
        if not known:
            bad.append((name, "unknown_tool"))
        elif not role_permits(name, AgentRole.worker):
            bad.append((name, "mode_restricted"))
    return bad


# ------------------------------------------------------------------------------------------ worker state


@dataclass(eq=False, kw_only=True, slots=True)
class WorkerSlot:
    """One worker of one session: its agent, its tree root and its current (or last) run."""

    session_id: str
    worker: PoolWorker
    agent_id: str
    root: Node | None = None
    reserved: bool = False
    """A dispatch selected this worker and is starting its run."""
    run: RunState | None = None
    waiting: bool = False
    """The dispatch that started :attr:`run` is still waiting for it."""
    task_id: str | None = None

    def status(self) -> WorkerStatus:
        if self.reserved:
            return "busy"
        run = self.run
        if run is None or run.terminal:
            return "idle"
        if run.cancel_event.is_set() or not self.waiting:
            return "unavailable"
        return "busy"


class WorkerSlots:
    """Per-session worker slots (created on first use; agent ids are deterministic)."""

    def __init__(self) -> None:
        self._slots: dict[tuple[str, str, str], WorkerSlot] = {}

    def get(self, session_id: str, worker: PoolWorker) -> WorkerSlot:
        key = (session_id, worker.pool_id, worker.worker_id)
        slot = self._slots.get(key)
        if slot is None:
            slot = WorkerSlot(
                session_id=session_id,
                worker=worker,
                agent_id=worker_agent_id(session_id, worker.pool_id, worker.worker_id),
            )
            self._slots[key] = slot
        else:
            slot.worker = worker  # re-validation may resolve a newer definition
        return slot

    def live(self) -> list[WorkerSlot]:
        return [s for s in self._slots.values() if s.run is not None and not s.run.terminal]

    def find_run(self, run_id: str) -> WorkerSlot | None:
        for slot in self._slots.values():
            if slot.run is not None and slot.run.run_id == run_id:
                return slot
        return None
