"""The :class:`ToolRegistry`: every tool of one runtime, keyed by canonical name (docs/tools.md,
docs/providers.md#tool-names).

Registration rules (all checked before anything is stored; a failing batch registers nothing):

* canonical names match :data:`CANONICAL_NAME` (``validation_error``);
* user registrations (``register_tool``, the ``tool`` decorator, ``register_adapter(internal=False)``) may
  not use the reserved ``agent.``, ``internal.`` or ``mcp.`` namespaces (``validation_error``); the runtime
  registers its own adapters with ``register_adapter(adapter, internal=True)``;
* a duplicate canonical name raises ``validation_error``; nothing is overwritten or suffixed;
* the input schema must lie in the core subset (``schema_error``, :mod:`agent_core.tools._schema`);
* tags are lowercase; ``metadata.timeout_ms`` (Python tools) is a positive integer.

Python handlers take ``(args: dict, ctx: ToolContext)``; synchronous handlers run in a worker thread and
cannot be interrupted (a cancellation takes effect when they return).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import re
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from agent_core._concurrency import wait_uninterrupted
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    ToolNotAvailableError,
)
from agent_core.tools._schema import check_schema, model_input_schema
from agent_core.tools.adapter import ToolAdapter
from agent_core.tools.context import ToolContext
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition

logger = logging.getLogger(__name__)

CANONICAL_NAME = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$")
RESERVED_USER_NAMESPACES = ("agent.", "internal.", "mcp.")
CORE_NAMESPACES = ("code.", "agent.", "internal.", "mcp.")

ToolHandler = Callable[[dict[str, Any], ToolContext], Any]
"""``(validated_args, ctx) -> ToolReturn`` (sync or async), docs/tools.md#registering-python-tools."""

F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------------------------
# Calling handlers


def _is_async_callable(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__
    )  # callable objects


async def run_in_thread_uncancellable(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Runs ``fn`` in the default executor. On cancellation waits for the thread, then re-raises."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future = loop.run_in_executor(None, functools.partial(context.run, fn, *args, **kwargs))
    return await wait_uninterrupted(future)  # a thread cannot be stopped: its end is awaited


async def call_handler(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Calls a sync or async handler; awaitables returned by sync callables are awaited."""
    if _is_async_callable(fn):
        result = await fn(*args, **kwargs)
    else:
        result = await run_in_thread_uncancellable(fn, *args, **kwargs)
    while inspect.isawaitable(result):
        result = await result
    return result


class FunctionToolAdapter:
    """Adapter for one Python handler registered with ``register_tool`` or the decorator."""

    def __init__(self, definition: ToolDefinition, handler: ToolHandler) -> None:
        self._definition = definition
        self._handler = handler

    def definitions(self) -> list[ToolDefinition]:
        return [self._definition]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        return await call_handler(self._handler, dict(call.arguments), ctx)

    async def close(self) -> None:
        return None


# ---------------------------------------------------------------------------------------------------
# Decorator support


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    text = inspect.cleandoc(doc)
    paragraph = text.split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines()).strip()


def _invalid(message: str, **details: Any) -> AgentCoreError:
    return InvalidArgumentError(ErrorCode.validation_error, message, details=details)


def _wrong_type(message: str, **details: Any) -> AgentCoreError:
    return InvalidArgumentTypeError(ErrorCode.validation_error, message, details=details)


def pydantic_errors(exc: ValidationError) -> list[dict[str, str]]:
    """Pydantic errors as ``[{path, message}]`` in the schema validator's path style."""
    out: list[dict[str, str]] = []
    for error in exc.errors():
        path = "$"
        for part in error.get("loc", ()):
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        out.append({"path": path, "message": str(error.get("msg", "invalid value"))})
    return out


def build_decorated_tool(
    fn: Callable[..., Any],
    *,
    name: str,
    description: str | None,
    permission: Literal["readonly", "write"],
    tags: Iterable[str],
    input_model: type[BaseModel] | None,
    metadata: dict[str, Any] | None,
) -> tuple[ToolDefinition, ToolHandler]:
    """Builds the definition and contract-form handler for ``@registry.tool``
    (docs/tools.md#registering-python-tools)."""
    desc = description if description is not None else _first_paragraph(fn.__doc__)
    if not desc:
        raise _invalid(f"tool {name!r} needs a description (argument or docstring)", tool=name)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise _invalid(f"cannot resolve the annotations of tool {name!r}: {exc}", tool=name) from exc
    params = list(inspect.signature(fn).parameters.values())
    ctx_param: str | None = None
    value_params: list[inspect.Parameter] = []
    for p in params:
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise _invalid(f"tool {name!r}: *args/**kwargs parameters are not supported", tool=name)
        if hints.get(p.name) is ToolContext:
            ctx_param = p.name
        else:
            value_params.append(p)

    model: type[BaseModel]
    if input_model is not None:
        if len(value_params) != 1:
            raise _invalid(
                f"tool {name!r}: with input_model the function takes exactly one argument "
                "(plus an optional ToolContext parameter)",
                tool=name,
            )
        model = input_model
    else:
        fields: dict[str, Any] = {}
        for p in value_params:
            if p.name not in hints:
                raise _invalid(f"tool {name!r}: parameter {p.name!r} needs a type annotation", tool=name)
            default = ... if p.default is inspect.Parameter.empty else p.default
            fields[p.name] = (hints[p.name], default)
        try:
            model = create_model(
                f"{name.replace('.', '_').replace('-', '_')}_args",
                __config__=ConfigDict(extra="forbid"),
                **fields,
            )
        except Exception as exc:
            raise _invalid(f"tool {name!r}: cannot build an input model: {exc}", tool=name) from exc
    schema = model_input_schema(model)
    meta = {"source": "python", **(metadata or {})}
    definition = ToolDefinition(
        name=name,
        description=desc,
        input_schema=schema,
        permission=permission,
        tags=list(dict.fromkeys(tags)),
        metadata=meta,
    )

    async def handler(args: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            parsed = model.model_validate(args)
        except ValidationError as exc:
            errors = pydantic_errors(exc)
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                "invalid tool arguments: " + "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5]),
                details={"errors": errors},
            ) from None
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for p in params:
            if p.name == ctx_param:
                value: Any = ctx
            elif input_model is not None:
                value = parsed
            else:
                value = getattr(parsed, p.name)
            if p.kind is inspect.Parameter.KEYWORD_ONLY:
                keywords[p.name] = value
            else:
                positional.append(value)
        return await call_handler(fn, *positional, **keywords)

    return definition, handler


# ---------------------------------------------------------------------------------------------------
# Registry


@dataclass(frozen=True, kw_only=True, slots=True)
class RegisteredTool:
    """One registry entry: the definition as registered and the adapter that executes it."""

    definition: ToolDefinition
    adapter: ToolAdapter
    internal: bool = False
    """Registered through the privileged runtime path."""
    python: bool = False
    """A Python handler (``register_tool``/decorator): ``metadata.timeout_ms`` is enforced by the core."""

    @property
    def name(self) -> str:
        return self.definition.name


def check_canonical_name(name: Any, *, user: bool) -> str:
    """Validates a canonical name (and, for user registrations, the reserved namespaces)."""
    if not isinstance(name, str):
        raise _wrong_type(f"a tool name must be a str, not {type(name).__name__}")
    if not CANONICAL_NAME.fullmatch(name):
        raise _invalid(
            f"invalid tool name {name!r}: expected two or more dot-separated segments of [A-Za-z0-9_-]",
            tool=name,
        )
    if user and name.startswith(RESERVED_USER_NAMESPACES):
        raise _invalid(
            f"tool name {name!r} uses a reserved namespace ({', '.join(RESERVED_USER_NAMESPACES)})", tool=name
        )
    return name


class ToolRegistry:
    """All tools of one runtime (no global singleton)."""

    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        self._adapters: list[ToolAdapter] = []
        self._closed = False

    # -- registration -------------------------------------------------------------------------------

    def register_tool(self, definition: ToolDefinition, handler: ToolHandler) -> None:
        """Registers one Python tool; ``handler(args, ctx)`` may be sync or async."""
        if not isinstance(definition, ToolDefinition):
            raise _wrong_type(f"register_tool expects a ToolDefinition, not {type(definition).__name__}")
        if not callable(handler):
            raise _wrong_type(f"handler of tool {definition.name!r} is not callable", tool=definition.name)
        if "source" not in definition.metadata:
            definition = definition.model_copy(
                update={"metadata": {**definition.metadata, "source": "python"}}
            )
        self._register([definition], FunctionToolAdapter(definition, handler), internal=False, python=True)

    def register_adapter(self, adapter: ToolAdapter, *, internal: bool = False) -> None:
        """Registers every definition of ``adapter``; ``internal=True`` is the runtime's privileged path."""
        if not isinstance(adapter, ToolAdapter):
            raise _wrong_type(f"{type(adapter).__name__} does not implement the ToolAdapter protocol")
        definitions = list(adapter.definitions())
        self._register(definitions, adapter, internal=internal, python=False)

    def tool(
        self,
        name: str,
        *,
        description: str | None = None,
        permission: Literal["readonly", "write"] = "readonly",
        tags: Iterable[str] = (),
        input_model: type[BaseModel] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Decorator registering a function as a tool; returns the function unchanged
        (docs/tools.md#registering-python-tools)."""

        def decorate(fn: F) -> F:
            check_canonical_name(name, user=True)
            definition, handler = build_decorated_tool(
                fn,
                name=name,
                description=description,
                permission=permission,
                tags=tags,
                input_model=input_model,
                metadata=metadata,
            )
            self._register(
                [definition], FunctionToolAdapter(definition, handler), internal=False, python=True
            )
            return fn

        return decorate

    def unregister_adapter(self, adapter: ToolAdapter) -> list[str]:
        """Removes every tool served by ``adapter`` (runtime use, e.g. MCP re-discovery); returns names."""
        removed = [name for name, entry in self._tools.items() if entry.adapter is adapter]
        for name in removed:
            del self._tools[name]
        self._adapters = [a for a in self._adapters if a is not adapter]
        return removed

    def _register(
        self, definitions: list[ToolDefinition], adapter: ToolAdapter, *, internal: bool, python: bool
    ) -> None:
        if self._closed:
            raise _invalid("the tool registry is closed; no further registrations are accepted")
        seen: set[str] = set()
        for definition in definitions:
            if not isinstance(definition, ToolDefinition):
                raise _wrong_type(f"adapter {type(adapter).__name__} returned a non-ToolDefinition value")
            name = check_canonical_name(definition.name, user=not internal)
            if name in self._tools or name in seen:
                raise _invalid(f"a tool named {name!r} is already registered", tool=name)
            seen.add(name)
            bad_tags = [t for t in definition.tags if not t or t != t.lower()]
            if bad_tags:
                raise _invalid(f"tool {name!r}: tags must be lowercase, got {bad_tags!r}", tool=name)
            timeout = definition.metadata.get("timeout_ms")
            if timeout is not None and (
                isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1
            ):
                raise _invalid(f"tool {name!r}: metadata.timeout_ms must be a positive integer", tool=name)
            check_schema(definition.input_schema, where=f"{name} input_schema")
        for definition in definitions:
            self._tools[definition.name] = RegisteredTool(
                definition=definition, adapter=adapter, internal=internal, python=python
            )
        if not any(a is adapter for a in self._adapters):
            self._adapters.append(adapter)

    # -- lookup -------------------------------------------------------------------------------------

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def definition(self, name: str) -> ToolDefinition:
        """The registered definition; ``tool_not_available`` for an unknown name."""
        entry = self._tools.get(name)
        if entry is None:
            raise ToolNotAvailableError(ErrorCode.tool_not_available, f"tool '{name}' is not registered")
        return entry.definition

    def definitions(self) -> list[ToolDefinition]:
        """Every registered definition, in registration order."""
        return [entry.definition for entry in self._tools.values()]

    def names(self) -> list[str]:
        return list(self._tools)

    def entries(self) -> list[RegisteredTool]:
        return list(self._tools.values())

    def adapters(self) -> list[ToolAdapter]:
        return list(self._adapters)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._tools))

    # -- lifecycle ----------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Closes every adapter once (errors are logged); later registrations are refused. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for adapter in self._adapters:
            try:
                await adapter.close()
            except Exception:
                logger.warning("closing tool adapter %s failed", type(adapter).__name__, exc_info=True)
