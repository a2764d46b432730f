"""The runtime's answers to an MCP server's sampling and elicitation requests (``docs/hooks-and-mcp.md``).

Both requests belong to the server's tool call in progress (``_mcp.features``) and therefore to that
call's run, its user and its budget.

Sampling (``sampling/createMessage``):

- Unless the server is ``"trusted": true`` in ``mcp.json``, the user is asked first through the runtime's
  permission callback (the same path as a tool call: chat, ``run``, the web UI, an SDK callback, a chat
  channel): a request with ``tool_name = "mcp.<server_id>.sampling"``, ``metadata.mcp_request =
  "sampling"`` and the server's messages in ``args_summary``. ``deny`` (or no callback) refuses the
  request; ``allow_for_session`` is remembered for the server's sampling in that session.
- The messages run on the calling run's model (without tools; the server's system prompt as the only
  system block; ``max_tokens`` capped by the model's ``max_output_tokens``), and the usage is charged to
  the run tree's ``[limits]`` budget: a request after a limit was reached is refused.
- The run's cancellation cancels the request.

Elicitation (``elicitation/create``): always asked the same way, ``tool_name =
"mcp.<server_id>.elicitation"``, ``metadata.mcp_request = "elicitation"`` with ``message`` and
``requested_schema`` (or ``url`` in URL mode). The answer's ``metadata.content`` (an object matching the
schema) is what the server receives when the decision allows; ``deny`` declines (``deny`` with
``metadata.elicitation = "cancel"`` cancels); no answer (timeout, cancellation) cancels.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_core._concurrency import race
from agent_core._ids import new_id
from agent_core._mcp.catalog import McpServerConfig
from agent_core._mcp.remote import (
    ElicitationReply,
    ElicitationRequest,
    McpRequestRefused,
    SamplingReply,
    SamplingRequest,
)
from agent_core._memory.llm import complete
from agent_core.config._pricing import Prices, cost_usd
from agent_core.errors import AgentCoreError
from agent_core.tools.context import ToolContext
from agent_core.types.content import TextBlock
from agent_core.types.model import ModelMessage, ModelRequest, SystemBlock
from agent_core.types.permissions import PermissionDecision, PermissionRequest

if TYPE_CHECKING:
    from agent_core._runtime.runs import RunManager
    from agent_core._runtime.state import RunState

SUMMARY_LIMIT = 2000


def _summary(request: SamplingRequest) -> str:
    lines = [f"{m.role}: {m.text}" for m in request.messages]
    if request.system_prompt:
        lines.insert(0, f"system: {request.system_prompt}")
    text = "\n".join(lines)
    cut = text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"
    return f"max_tokens={request.max_tokens}\n{cut}"


async def _until_cancelled(ctx: ToolContext, work: Any) -> Any:
    """Awaits ``work`` unless the calling run is cancelled first (then the work is cancelled)."""
    task = await race(work, ctx.cancel_event)  # cancelled and awaited once the run is cancelled
    if task.cancelled():
        raise McpRequestRefused("the run was cancelled")
    return task.result()


class RuntimeMcpHost:
    """The :class:`~agent_core._mcp.features.McpHost` of one runtime (see the module docstring)."""

    def __init__(self, manager: RunManager) -> None:
        self._manager = manager
        self._granted: set[tuple[str, str]] = set()
        """``(session_id, server_id)`` whose sampling the user allowed for the session."""

    def _run(self, ctx: ToolContext) -> RunState:
        state = self._manager.runs.get(ctx.run_id)
        if state is None:
            raise McpRequestRefused("the calling run has ended")
        return state

    async def _ask(
        self,
        ctx: ToolContext,
        server: McpServerConfig,
        kind: str,
        summary: str,
        metadata: dict[str, Any],
    ) -> PermissionDecision | None:
        gate = self._manager.services.gate
        request = PermissionRequest(
            request_id=new_id("perm_"),
            session_id=ctx.session_id,
            agent_id=ctx.agent_id,
            run_id=ctx.run_id,
            parent_agent_id=ctx.parent_agent_id,
            parent_run_id=ctx.parent_run_id,
            agent_role=ctx.agent_role,
            tool_name=f"mcp.{server.server_id}.{kind}",
            permission="readonly",
            tags=["mcp", kind],
            args_summary=self._manager.services.redactor.text(summary),
            cwd=str(ctx.cwd),
            env_summary={},
            network_host=server.network_host,
            dangerous=False,
            suggested_decision="allow_once",
            metadata={
                "mcp_request": kind,
                "server_id": server.server_id,
                "tool_call_id": ctx.tool_call_id,
                **metadata,
            },
        )
        answer, _failure, _message = await _until_cancelled(ctx, gate.ask_callback(request))
        return answer  # type: ignore[no-any-return]

    async def sample(
        self, server: McpServerConfig, ctx: ToolContext, request: SamplingRequest
    ) -> SamplingReply:
        state = self._run(ctx)
        key = (ctx.session_id, server.server_id)
        if not server.trusted and key not in self._granted:
            answer = await self._ask(
                ctx, server, "sampling", _summary(request), {"max_tokens": request.max_tokens}
            )
            if answer is None or answer.decision == "deny":
                raise McpRequestRefused("the user declined the sampling request")
            if answer.decision == "allow_for_session":
                self._granted.add(key)
        budget = state.budget
        if budget is not None:
            breach = budget.spent()
            if breach is not None:
                raise McpRequestRefused(f"sampling refused: {breach.error().message}")
        model = state.model
        if model is None:
            raise McpRequestRefused("the calling run has no model")
        services = self._manager.services
        max_tokens = request.max_tokens
        if model.max_output_tokens is not None:
            max_tokens = min(max_tokens, model.max_output_tokens)
        system = (
            [SystemBlock(block_id="mcp_sampling", source="mcp", content=request.system_prompt)]
            if request.system_prompt
            else []
        )
        messages = [
            ModelMessage(
                role="assistant" if m.role == "assistant" else "user", content=[TextBlock(text=m.text)]
            )
            for m in request.messages
        ]
        model_request = ModelRequest(
            model=model.name,
            system=system,
            messages=messages,
            temperature=request.temperature if request.temperature is not None else model.temperature,
            max_output_tokens=max_tokens,
            stop_sequences=list(request.stop_sequences),
            metadata={"session_id": ctx.session_id, "purpose": "mcp_sampling", "debug": False},
        )
        try:
            completed = await _until_cancelled(ctx, complete(services.adapter_for(model), model_request))
        except AgentCoreError as exc:
            raise McpRequestRefused(f"sampling failed: {services.redactor.text(exc.message)}") from exc
        if budget is not None:
            budget.add_usage(completed.usage, cost_usd(completed.usage, Prices.for_model(model)))
        text = "".join(b.text for b in completed.content if isinstance(b, TextBlock))
        await ctx.emit_progress(
            {
                "mcp_sampling": {
                    "server_id": server.server_id,
                    "input_tokens": completed.usage.input_tokens,
                    "output_tokens": completed.usage.output_tokens,
                }
            }
        )
        return SamplingReply(text=text, model=model.name, stop_reason=str(completed.stop_reason))

    async def elicit(
        self, server: McpServerConfig, ctx: ToolContext, request: ElicitationRequest
    ) -> ElicitationReply:
        self._run(ctx)
        metadata: dict[str, Any] = {"message": request.message}
        if request.url is not None:
            metadata["url"] = request.url
            summary = f"{request.message}\nopen: {request.url}"
        else:
            metadata["requested_schema"] = request.requested_schema
            fields = ", ".join(sorted((request.requested_schema.get("properties") or {}).keys()))
            summary = f"{request.message}\nfields: {fields or '(none)'}\nschema: {json.dumps(request.requested_schema)[:1000]}"
        try:
            answer = await self._ask(ctx, server, "elicitation", summary, metadata)
        except McpRequestRefused:
            return ElicitationReply(action="cancel")
        if answer is None:
            return ElicitationReply(action="cancel")
        if answer.decision == "deny":
            cancelled = answer.metadata.get("elicitation") == "cancel"
            return ElicitationReply(action="cancel" if cancelled else "decline")
        content = answer.metadata.get("content")
        if request.url is None and not isinstance(content, dict):
            content = {}
        return ElicitationReply(action="accept", content=content if isinstance(content, dict) else None)
