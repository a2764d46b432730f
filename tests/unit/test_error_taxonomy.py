"""One error taxonomy (issue 35 item 5): a class for every ``ErrorCode``, raise sites that use it, misuse
of the SDK as ``TypeError`` / ``ValueError``.

The static checks read ``src/agent_core`` with ``ast``: no bare ``AgentCoreError(...)`` is constructed
outside ``errors/``, and every ``SomeError(ErrorCode.x, ...)`` uses the class of ``x`` (or a subclass of
it), so ``except PermissionDeniedError`` / ``except StorageError`` catch every error of their codes.
"""

from __future__ import annotations

import ast
import importlib
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import agent_core
from agent_core import errors
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    InternalError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NotFoundError,
    PermissionDeniedError,
    ProviderAuthError,
    ProviderError,
    ProviderRateLimitError,
    ProviderTimeoutError,
    SessionBusyError,
    SessionNotFoundError,
    StepError,
    StorageError,
    TaskError,
    ToolError,
    UnsupportedCapabilityError,
    error_class,
    error_for,
)
from agent_core.errors.exceptions import _CLASSES
from agent_core.testing import FunctionModel, ModelRequest, open_runtime
from agent_core.types.content import ErrorPayload
from agent_core.types.model import ProviderErrorPayload
from agent_core.types.runtime import AgentDefinition
from tests.fixtures.architecture import architecture_report

SRC = Path(agent_core.__file__).resolve().parent
ERROR_CLASSES = {
    name: value
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, AgentCoreError)
}
CONTRACT_DEFAULTS = {AgentCoreError, ToolError}
"""Classes whose default code is fixed elsewhere (``internal_error``) and that are not that code's class:
the base, and ``ToolError`` (a custom tool's handler raises it with any code)."""


# ---- the map ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_every_code_has_one_class_that_carries_it(code: ErrorCode) -> None:
    cls = error_class(code)
    assert issubclass(cls, AgentCoreError) and cls is not AgentCoreError
    err = error_for(code, "m", details={"k": 1})
    assert type(err) is cls and err.code is code and err.message == "m" and err.details == {"k": 1}
    assert err.to_payload().code == code
    assert not issubclass(cls, PermissionError)  # Python's PermissionError is never an agent denial


def test_every_error_class_is_exported_and_owns_its_default_code() -> None:
    assert set(_CLASSES.values()) <= set(ERROR_CLASSES.values())
    for name, cls in ERROR_CLASSES.items():
        assert getattr(agent_core, name) is cls, f"agent_core.{name} is not exported"
        if cls not in CONTRACT_DEFAULTS:
            assert issubclass(cls, error_class(cls.default_code)), name
        assert cls().code is cls.default_code


def test_families_branch_as_callers_expect() -> None:
    assert issubclass(SessionNotFoundError, NotFoundError) and issubclass(NotFoundError, ValueError)
    assert issubclass(InvalidArgumentTypeError, TypeError) and issubclass(
        InvalidArgumentTypeError, ValueError
    )
    assert issubclass(SessionBusyError, StorageError)
    assert issubclass(error_class(ErrorCode.step_already_claimed), StepError)
    assert issubclass(StepError, TaskError) and issubclass(error_class(ErrorCode.task_not_found), TaskError)
    for code in (
        "provider_auth_failed",
        "provider_rate_limited",
        "provider_timeout",
        "unsupported_capability",
    ):
        assert issubclass(error_class(code), ProviderError)


def test_a_payload_becomes_the_exception_of_its_code() -> None:
    err = AgentCoreError.from_payload(
        ErrorPayload(code=ErrorCode.permission_denied, message="no", details={"tool": "t"})
    )
    assert type(err) is PermissionDeniedError and err.details == {"tool": "t"}
    for code, cls in [
        ("provider_auth_failed", ProviderAuthError),
        ("provider_rate_limited", ProviderRateLimitError),
        ("provider_timeout", ProviderTimeoutError),
        ("unsupported_capability", UnsupportedCapabilityError),
        ("provider_error", ProviderError),
        ("vendor_specific_thing", ProviderError),  # not an ErrorCode: the family's base, provider_error
    ]:
        payload = ProviderErrorPayload(type="provider", code=code, message="m", retryable=False)
        err = ProviderError.for_payload(payload)
        assert type(err) is cls and err.payload is payload
        assert err.code == (code if code in ErrorCode.__members__ else ErrorCode.provider_error)


# ---- the raise sites -------------------------------------------------------------------------------
def _module_of(path: Path) -> str:
    parts = ["agent_core", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_optional(name: str) -> Any:
    """The module, or ``None`` when an optional extra it needs is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _error_classes_in(module: Any) -> dict[str, type[AgentCoreError]]:
    if module is None:
        return {}
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, AgentCoreError)
    }


def _code_of(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ErrorCode":
        return node.attr
    return None


def _sources() -> list[Any]:
    """The package's files outside ``errors/``, parsed once per process (``tests/fixtures/architecture``)."""
    return [
        s
        for s in architecture_report().source_files(SRC.parent)
        if s.path.relative_to(SRC).parts[0] != "errors"
    ]


def test_no_bare_agent_core_error_is_constructed_outside_errors() -> None:
    found = []
    for source in _sources():
        path = source.path
        for node in source.nodes:
            if isinstance(node, ast.Call):
                func = node.func
                name = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if name == "AgentCoreError":
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == [], f"raise the class of the code (errors.error_class / error_for) instead: {found}"


def test_every_raise_site_uses_the_class_of_its_code() -> None:
    wrong = []
    checked = 0
    for source in _sources():
        path = source.path
        name = _module_of(path)
        module = None if name.endswith("__main__") else _import_optional(name)
        classes = {**ERROR_CLASSES, **_error_classes_in(module)}
        for node in source.nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes:
                cls = classes[node.func.id]
                arg = (
                    node.args[0]
                    if node.args
                    else next((k.value for k in node.keywords if k.arg == "code"), None)
                )
                code = _code_of(arg)
                if arg is None:
                    code = cls.default_code.value
                    if cls in CONTRACT_DEFAULTS:
                        wrong.append(f"{path.relative_to(SRC)}:{node.lineno} {cls.__name__}() without a code")
                        continue
                if code is None:
                    continue  # a code computed at run time: the constructor of a class that maps it
                checked += 1
                if not issubclass(cls, error_class(code)):
                    wrong.append(
                        f"{path.relative_to(SRC)}:{node.lineno} {cls.__name__}({code}) "
                        f"should be {error_class(code).__name__}"
                    )
        for cls_node in (n for n in source.nodes if isinstance(n, ast.ClassDef)):
            cls = getattr(module, cls_node.name, None)
            for node in ast.walk(cls_node):
                if (
                    isinstance(node, ast.Assign)
                    and any(ast.unparse(t) == "self.code" for t in node.targets)
                    and (code := _code_of(node.value)) is not None
                ):
                    checked += 1
                    if not (isinstance(cls, type) and issubclass(cls, error_class(code))):
                        wrong.append(
                            f"{path.relative_to(SRC)}:{node.lineno} {cls_node.name} sets code {code}"
                        )
    assert wrong == []
    assert checked > 200  # the scan sees the project's raise sites


# ---- misuse of the SDK -----------------------------------------------------------------------------
def _misuse_calls(runtime: agent_core.AgentRuntime) -> list[tuple[str, Any, type[Exception]]]:
    return [
        ("start(123)", lambda: runtime.start(123), TypeError),  # type: ignore[arg-type]
        ("start(mode='x')", lambda: runtime.start("hi", mode="x"), ValueError),  # type: ignore[arg-type]
        ("start(session_id=5)", lambda: runtime.start("hi", session_id=5), TypeError),  # type: ignore[arg-type]
        ("start(output_schema=5)", lambda: runtime.start("hi", output_schema=5), TypeError),  # type: ignore[arg-type]
        ("start(output_retries=-1)", lambda: runtime.start("hi", output_schema={"type": "object"}, output_retries=-1), ValueError),
        ("replay_session(from_seq='a')", lambda: runtime.replay_session("ses_x", from_seq="a"), TypeError),  # type: ignore[arg-type]
        ("list_sessions('a')", lambda: runtime.list_sessions("a"), TypeError),  # type: ignore[arg-type]
        ("list_sessions(0)", lambda: runtime.list_sessions(0), ValueError),
        ("cleanup_artifacts(max_bytes='a')", lambda: runtime.cleanup_artifacts(max_bytes="a"), TypeError),  # type: ignore[arg-type]
        ("cleanup_artifacts(older_than='a')", lambda: runtime.cleanup_artifacts(older_than="a"), TypeError),  # type: ignore[arg-type]
        ("cleanup_project_tasks(5)", lambda: runtime.cleanup_project_tasks(5), TypeError),  # type: ignore[arg-type]
        ("answer_permission(x, 'maybe')", lambda: runtime.answer_permission("req_x", "maybe"), ValueError),  # type: ignore[arg-type]
        ("add_schedule('not a cron')", lambda: runtime.add_schedule("not a cron", "hi"), ValueError),
    ]  # fmt: skip


async def test_misuse_of_the_sdk_is_a_type_or_value_error_with_validation_error(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    async with open_runtime(
        FunctionModel(lambda r: "hi"), project_dir=tmp_path / "p", home_dir=tmp_path / "h"
    ) as rt:
        for name, call, expected in _misuse_calls(rt):
            with pytest.raises(expected) as info:
                await call()
            assert isinstance(info.value, InvalidArgumentError), name
            assert info.value.code == ErrorCode.validation_error, name
        for _name, sync_call in [
            ("register_tool('x', f)", lambda: rt.register_tool("x", lambda a, c: 1)),  # type: ignore[arg-type]
            ("register_provider(5, f)", lambda: rt.register_provider(5, lambda c: 1)),  # type: ignore[arg-type]
            ("register_agent_definition('x')", lambda: rt.register_agent_definition("x")),  # type: ignore[arg-type]
        ]:
            with pytest.raises(InvalidArgumentTypeError):
                sync_call()
        for name, lookup in [
            ("replay_session", lambda: rt.replay_session("ses_x")),
            ("fork_session", lambda: rt.fork_session("ses_x", "node_x")),
            ("start", lambda: rt.start("hi", session_id="ses_x")),
        ]:
            with pytest.raises(SessionNotFoundError) as found:
                await lookup()
            assert found.value.details["session_id"] == "ses_x", name
        for lookup in (lambda: rt.replay_run("run_x"), lambda: rt.get_node_path("node_x")):
            with pytest.raises(NotFoundError):
                await lookup()
        valid = AgentDefinition(agent_definition_id="a", name="a", description="d", source="code")
        rt.register_agent_definition(valid)  # the check lets a definition through
    with pytest.raises(InvalidArgumentError):
        await rt.start("after close")


async def test_output_of_a_failed_run_raises_the_class_of_the_run_error(tmp_path: Path) -> None:
    def broken(request: ModelRequest) -> str:
        raise RuntimeError("model exploded")

    (tmp_path / "p").mkdir()
    async with open_runtime(FunctionModel(broken), project_dir=tmp_path / "p", home_dir=tmp_path / "h") as rt:
        run = await rt.start("hi", output_schema={"type": "object"})
        with pytest.raises(InternalError) as info:
            await run.output()
        assert info.value.code == ErrorCode.internal_error and "model exploded" in info.value.message
        plain = await rt.start("hi")
        with pytest.raises(InvalidArgumentError):
            await plain.output()  # started without output_schema


def test_check_type_names_the_argument() -> None:
    from agent_core._api._args import check_type

    check_type("n", 3, int)
    check_type("n", None, int, optional=True)
    check_type("when", datetime.now(), datetime)
    with pytest.raises(InvalidArgumentTypeError, match="n must be int, not bool"):
        check_type("n", True, int)
    with pytest.raises(InvalidArgumentTypeError, match="n must be int or None, not str") as info:
        check_type("n", "3", int, optional=True)
    assert info.value.details == {"argument": "n"}
