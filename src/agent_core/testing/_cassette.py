"""Cassettes: record a session's model calls to a JSON file, then replay them without a model.

``record(path, model)`` wraps a model (a test model, or any provider factory such as the OpenAI adapter
class) and stores, for every call, the provider-neutral request and the streamed response events.
``replay(path)`` answers the calls from the file, in order; a request that differs from the recorded one
fails that call (the run fails with ``provider_error``) with a readable diff of what changed, kept in
:attr:`Cassette.mismatches` and raised by :meth:`Cassette.verify` as :class:`CassetteMismatch`.

Requests are compared after normalisation: request/message/block metadata and token counts are dropped,
generated ids (``sess_…``, ``node_…``, ``call_…``) are masked, and the ``project_dir`` and
``current_date_utc`` lines of the runtime-state block are masked, so a re-run in another directory or on
another day still matches. The file is rewritten atomically after every call.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import ErrorCode, InvalidArgumentError, InvalidArgumentTypeError
from agent_core.providers.base import ProviderAdapter
from agent_core.types.model import (
    ModelCompleted,
    ModelEvent,
    ModelFailed,
    ModelRequest,
    ProviderErrorPayload,
)

CASSETTE_VERSION = 1
_EVENTS: TypeAdapter[list[ModelEvent]] = TypeAdapter(list[ModelEvent])
_ID = re.compile(r"\b([a-z]+)_\d{8}_\d{6}_[0-9a-f]{12}\b")
_MASKED_LINES = re.compile(r"^(project_dir|current_date_utc): .*$", re.M)
_SECTIONS = ("model", "system", "tools", "tool_choice", "messages", "options")


class CassetteMismatch(AssertionError):
    """A replayed request differs from the recorded one (the message is the diff)."""


def normalise_request(request: ModelRequest) -> dict[str, Any]:
    """The comparable, JSON-compatible form of ``request`` (see the module docstring)."""
    system = []
    for block in request.system:
        content = _ID.sub(r"\1_*", block.content)
        if block.dynamic:
            content = _MASKED_LINES.sub(r"\1: *", content)
        system.append({"block_id": block.block_id, "content": content})
    messages = [
        {"role": m.role, "content": _mask(_without_metadata([b.model_dump(mode="json") for b in m.content]))}
        for m in request.messages
    ]
    return {
        "model": request.model,
        "system": system,
        "tools": [t.model_dump(mode="json", exclude={"metadata"}) for t in request.tools],
        "tool_choice": request.tool_choice
        if isinstance(request.tool_choice, str)
        else request.tool_choice.model_dump(mode="json"),
        "messages": messages,
        "options": {
            "temperature": request.temperature,
            "max_output_tokens": request.max_output_tokens,
            "stop_sequences": list(request.stop_sequences),
            "provider_options": request.provider_options,
        },
    }


def _without_metadata(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_metadata(v) for k, v in value.items() if k not in ("metadata", "redacted")}
    if isinstance(value, list):
        return [_without_metadata(v) for v in value]
    return value


def _mask(value: Any) -> Any:
    if isinstance(value, str):
        return _ID.sub(r"\1_*", value)
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def _section_lines(name: str, value: Any) -> list[str]:
    if name == "system":
        lines: list[str] = []
        for block in value:
            lines.append(f"[{block['block_id']}]")
            lines.extend(block["content"].splitlines())
        return lines
    if name == "messages":
        lines = []
        for index, message in enumerate(value):
            lines.append(f"#{index} {message['role']}:")
            for block in message["content"]:
                if block.get("type") == "text":
                    lines.extend("  " + line for line in block["text"].splitlines() or [""])
                else:
                    lines.append("  " + json.dumps(block, sort_keys=True))
        return lines
    if name == "tools":
        return [f"{t['name']}: {json.dumps(t, sort_keys=True)}" for t in value]
    return json.dumps(value, indent=2, sort_keys=True).splitlines()


def request_diff(recorded: dict[str, Any], actual: dict[str, Any]) -> str:
    """A unified diff per differing section (system prompt, tools, messages, ...); '' when equal."""
    parts: list[str] = []
    for name in _SECTIONS:
        before, after = recorded.get(name), actual.get(name)
        if before == after:
            continue
        diff = difflib.unified_diff(
            _section_lines(name, before),
            _section_lines(name, after),
            f"recorded {name}",
            f"actual {name}",
            lineterm="",
            n=2,
        )
        parts.append("\n".join(diff))
    return "\n".join(parts)


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Cassette:
    """A cassette file in ``record`` or ``replay`` mode; register :meth:`factory` as the provider."""

    def __init__(
        self,
        path: str | Path,
        mode: Literal["record", "replay"],
        *,
        provider_key: str,
        model_name: str,
        inner: Callable[[ResolvedModelConfig], ProviderAdapter] | None = None,
        interactions: list[dict[str, Any]] | None = None,
    ) -> None:
        self.path = Path(path)
        self.mode = mode
        self.provider_key = provider_key
        self.model_name = model_name
        self.interactions: list[dict[str, Any]] = list(interactions or [])
        self.position = 0
        self.mismatches: list[str] = []
        self._inner = inner

    def factory(self, config: ResolvedModelConfig) -> ProviderAdapter:
        """The ``ProviderFactory``: a recording wrapper of the inner model, or a replaying adapter."""
        if self.mode == "record":
            assert self._inner is not None
            return _RecordingAdapter(self, self._inner(config))
        return _ReplayAdapter(self)

    def verify(self) -> None:
        """Raises :class:`CassetteMismatch` for a differing request or unreplayed recorded calls."""
        problems = list(self.mismatches)
        if self.mode == "replay" and self.position < len(self.interactions):
            problems.append(
                f"{len(self.interactions) - self.position} recorded model call(s) were never replayed "
                f"({self.position} of {len(self.interactions)} used)"
            )
        if problems:
            raise CassetteMismatch(f"cassette {self.path}:\n" + "\n\n".join(problems))

    def _save(self) -> None:
        _write_atomic(
            self.path,
            {
                "version": CASSETTE_VERSION,
                "provider_key": self.provider_key,
                "model": self.model_name,
                "interactions": self.interactions,
            },
        )


class _RecordingAdapter:
    def __init__(self, cassette: Cassette, inner: ProviderAdapter) -> None:
        self.cassette = cassette
        self.inner = inner
        self.provider_key = inner.provider_key

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        events: list[dict[str, Any]] = []
        async for event in self.inner.stream(request):
            events.append(event.model_dump(mode="json"))
            if isinstance(event, ModelCompleted | ModelFailed):
                self.cassette.interactions.append({"request": normalise_request(request), "events": events})
                self.cassette._save()
            yield event

    async def close(self) -> None:
        await self.inner.close()


class _ReplayAdapter:
    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.provider_key = cassette.provider_key

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        cassette = self.cassette
        number = cassette.position + 1
        actual = normalise_request(request)
        if cassette.position >= len(cassette.interactions):
            problem = (
                f"model call #{number} was not recorded (the cassette holds {len(cassette.interactions)})"
            )
        else:
            entry = cassette.interactions[cassette.position]
            diff = request_diff(entry["request"], actual)
            problem = f"model call #{number} differs from the recording:\n{diff}" if diff else ""
        cassette.position += 1
        if problem:
            cassette.mismatches.append(problem)
            yield ModelFailed(
                error=ProviderErrorPayload(
                    type="invalid_request",
                    code=ErrorCode.provider_error.value,
                    message=f"cassette {cassette.path.name}: {problem}",
                    retryable=False,
                    provider=self.provider_key,
                    model=request.model,
                )
            )
            return
        for event in _EVENTS.validate_python(entry["events"]):
            yield event

    async def close(self) -> None:
        return None


def record(
    path: str | Path,
    model: Any,
    *,
    provider_key: str | None = None,
    model_name: str | None = None,
) -> Cassette:
    """A recording cassette around ``model``: a test model, or a provider factory plus ``provider_key``.

    The file is (re)written from scratch; every completed or failed model call is appended at once.
    """
    inner: Callable[[ResolvedModelConfig], ProviderAdapter]
    factory = getattr(model, "factory", None)
    if callable(factory):
        inner = factory
    elif callable(model):
        inner = model
    else:
        raise InvalidArgumentTypeError(
            ErrorCode.validation_error, "record() needs a test model or a provider factory"
        )
    key = provider_key or getattr(model, "provider_key", None)
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError(
            ErrorCode.validation_error, "record() needs provider_key= for a plain provider factory"
        )
    name = model_name or getattr(model, "model_name", None) or "test-model"
    cassette = Cassette(path, "record", provider_key=key, model_name=str(name), inner=inner)
    cassette._save()
    return cassette


def replay(path: str | Path) -> Cassette:
    """A replaying cassette from ``path``; a missing or malformed file is a ``validation_error``."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            f"cannot read cassette {file}: {exc}",
            details={"path": str(file)},
            cause=exc,
        ) from exc
    problem = None
    if not isinstance(data, dict) or data.get("version") != CASSETTE_VERSION:
        problem = f"not a version-{CASSETTE_VERSION} cassette"
    elif not isinstance(data.get("interactions"), list) or not isinstance(data.get("provider_key"), str):
        problem = "missing 'interactions' or 'provider_key'"
    else:
        try:
            for entry in data["interactions"]:
                _EVENTS.validate_python(entry["events"])
                if not isinstance(entry["request"], dict):
                    raise TypeError("request is not an object")
        except (ValidationError, KeyError, TypeError) as exc:
            problem = f"invalid interaction: {exc}"
    if problem is not None:
        raise InvalidArgumentError(
            ErrorCode.validation_error, f"invalid cassette {file}: {problem}", details={"path": str(file)}
        )
    return Cassette(
        file,
        "replay",
        provider_key=data["provider_key"],
        model_name=str(data.get("model") or "test-model"),
        interactions=data["interactions"],
    )
