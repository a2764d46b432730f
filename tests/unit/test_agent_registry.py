"""Pure parts of the multi-agent package: definition parsing, override resolution, packaged assets,
model resolution and the child result contract (docs/multi-agent.md#agent-definitions,
docs/multi-agent.md#child-results).

Traceability: the case ids (``I5``, ``D9``) of docs/testing.md#case-catalogue are in the test docstrings.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agent_core._agents.registry import (
    AgentDefinitionRegistry,
    Candidate,
    parse_definition_text,
    resolve_chain,
)
from agent_core._agents.results import build_result, run_error, schema_problems, structured_output
from agent_core._agents.tools import delegation_text
from agent_core._asset_loader import BUILTIN_AGENT_ASSETS, AssetLoader
from agent_core.config.loader import LoadedConfig, load_config
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import RunStatus
from agent_core.types.runtime import AgentDefinition
from tests.fixtures.env import SoongEnv

PACKAGE_ASSETS = Path(__file__).resolve().parents[2] / "src" / "agent_core" / "assets"


def candidate(agent_id: str, source: str, overrides: str | None = None) -> Candidate:
    definition = AgentDefinition(
        agent_definition_id=agent_id,
        name=agent_id,
        description="d",
        source=source,  # type: ignore[arg-type]
        overrides=overrides,
    )
    return Candidate(definition=definition, origin=f"{source}-origin")


def loaded(env: SoongEnv, **overrides: Any) -> LoadedConfig:
    env.write_config(**overrides)
    return load_config(home_dir=env.home, project_dir=env.project)


def registry(env: SoongEnv, assets: AssetLoader | None = None, **config: Any) -> AgentDefinitionRegistry:
    return AgentDefinitionRegistry(
        assets=assets or AssetLoader(), config=loaded(env, **config), tools=lambda: []
    )


# ---- parsing ---------------------------------------------------------------------------------------


def test_parse_definition_file() -> None:
    text = (
        "---\nid: code_reviewer\nname: Code Reviewer\ndescription: Reviews diffs.\nmodel_profile: small\n"
        "suggested_tools: [code.read_file, code.search]\ntags: [review, readonly]\n"
        "overrides: builtin:code_reviewer\nmetadata: {team: qa}\n---\n# Code Reviewer\nYou review code.\n"
    )
    definition = parse_definition_text(text, source="user", where="x.md")
    assert definition.agent_definition_id == "code_reviewer" and definition.source == "user"
    assert definition.body == "# Code Reviewer\nYou review code."
    assert definition.suggested_tools == ["code.read_file", "code.search"]
    assert definition.overrides == "builtin:code_reviewer" and definition.metadata == {"team": "qa"}
    assert definition.model_profile == "small"


@pytest.mark.parametrize(
    "front",
    [
        "name: X\ndescription: d",
        "id: x\ndescription: d",
        "id: x\nname: X",
        "id: x\nname: X\ndescription: '   '",
        "id: x\nname: X\ndescription: d\nextra: 1",
        "id: x\nname: X\ndescription: d\ntags: [1]",
        "id: X\nname: X\ndescription: d",
        "id: x\nname: X\ndescription: d\noverrides: nope",
        "id: 5\nname: X\ndescription: d",
    ],
)
def test_parse_rejects_invalid_frontmatter(front: str) -> None:
    with pytest.raises(AgentCoreError) as err:
        parse_definition_text(f"---\n{front}\n---\nbody", source="user", where="x.md")
    assert err.value.code == ErrorCode.invalid_agent_definition


def test_packaged_agent_assets_parse_with_titles() -> None:
    loader = AssetLoader()
    for agent_id, asset_id in BUILTIN_AGENT_ASSETS.items():
        asset = loader.load(asset_id)
        assert asset.resource == f"agents/{agent_id}.md"
        definition = parse_definition_text(asset.text, source="builtin", where=asset.resource)
        assert definition.agent_definition_id == agent_id and definition.body.startswith("# ")
        assert "builtin" in definition.tags
    worker = parse_definition_text(
        loader.load("agent.default_worker_agent").text, source="builtin", where="w"
    )
    assert worker.suggested_tools == [
        "agent.task_get",
        "agent.task_query_steps",
        "agent.task_claim_step",
        "agent.task_update_step",
        "code.read_file",
        "code.search",
    ]


@pytest.mark.parametrize("problem", ["missing", "empty", "wrong_id"])
def test_broken_agent_asset_is_internal_error(soong_env: SoongEnv, tmp_path: Path, problem: str) -> None:
    root = tmp_path / "assets"
    shutil.copytree(PACKAGE_ASSETS, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    target = root / "agents" / "default_fork_agent.md"
    if problem == "missing":
        target.unlink()
    elif problem == "empty":
        target.write_text("  \n")
    else:
        target.write_text(target.read_text().replace("id: default_fork_agent", "id: other_fork"))
    reg = registry(soong_env, AssetLoader(root))
    with pytest.raises(AgentCoreError) as err:
        reg.load()
        reg.public_ids()  # only packaged definitions: parsed on the first lookup (cold start)
    assert err.value.code == ErrorCode.internal_error


# ---- override resolution ---------------------------------------------------------------------------


def test_resolve_chain_orders_by_rank_and_keeps_the_chain() -> None:
    resolved = resolve_chain(
        "x",
        [candidate("x", "code", "user:x"), candidate("x", "builtin"), candidate("x", "user", "builtin:x")],
    )
    assert [c.source for c in resolved.chain] == ["builtin", "user", "code"]
    assert resolved.definition.source == "code"


@pytest.mark.parametrize(
    ("candidates", "code"),
    [
        ([("user", None), ("user", "user:x")], ErrorCode.duplicate_agent_definition),
        ([("builtin", None), ("user", None)], ErrorCode.duplicate_agent_definition),
        ([("builtin", None), ("code", "builtin:x"), ("user", "builtin:x")], ErrorCode.invalid_agent_override),
        ([("user", "builtin:x")], ErrorCode.invalid_agent_override),
        ([("user", "code:x"), ("code", "user:x")], ErrorCode.invalid_agent_override),
        ([("builtin", None), ("user", "builtin:y")], ErrorCode.invalid_agent_override),
        ([("builtin", None), ("user", "code:x")], ErrorCode.invalid_agent_override),
    ],
)
def test_resolve_chain_errors(candidates: list[tuple[str, str | None]], code: ErrorCode) -> None:
    with pytest.raises(AgentCoreError) as err:
        resolve_chain("x", [candidate("x", source, overrides) for source, overrides in candidates])
    assert err.value.code == code


def test_failed_registration_leaves_the_registry_unchanged(soong_env: SoongEnv) -> None:
    reg = registry(soong_env)
    reg.load()
    good = AgentDefinition(agent_definition_id="h", name="h", description="d", body="ONE", source="code")
    reg.register(good)
    with pytest.raises(AgentCoreError):
        reg.register(good.model_copy(update={"body": "TWO", "overrides": "builtin:h"}))
    with pytest.raises(AgentCoreError):
        reg.register(good.model_copy(update={"agent_definition_id": "y", "suggested_tools": ["nope.tool"]}))
    assert reg.get("h") is not None and reg.get("h").body == "ONE"  # type: ignore[union-attr]
    assert reg.get("y") is None and reg.public_ids() == [
        "default_fork_agent",
        "default_sub_agent",
        "default_worker_agent",
        "h",
    ]
    with pytest.raises(AgentCoreError) as err:
        reg.for_child("default_compact_agent")
    assert err.value.code == ErrorCode.validation_error


def test_mcp_suggested_tools_check_the_server_catalog(soong_env: SoongEnv) -> None:
    reg = AgentDefinitionRegistry(
        assets=AssetLoader(), config=loaded(soong_env), tools=lambda: [], mcp_server_ids=lambda: {"files"}
    )
    reg.load()
    reg.register(
        AgentDefinition(
            agent_definition_id="m",
            name="m",
            description="d",
            source="code",
            suggested_tools=["mcp.files.read"],
        )
    )
    with pytest.raises(AgentCoreError) as err:
        reg.register(
            AgentDefinition(
                agent_definition_id="n",
                name="n",
                description="d",
                source="code",
                suggested_tools=["mcp.other.x"],
            )
        )
    assert err.value.code == ErrorCode.invalid_agent_definition
    from agent_core.types.enums import AgentRole

    assert reg.tool_availability("mcp.files.read", AgentRole.sub)[0] == "policy_restricted"


# ---- model resolution ------------------------------------------------------------------------------


def test_model_resolution_layers(soong_env: SoongEnv) -> None:
    """Case I25."""
    reg = registry(soong_env, model_overrides={"small": {"name": "small-model", "max_output_tokens": 256}})
    reg.load()
    named = AgentDefinition(
        agent_definition_id="a", name="a", description="d", model_profile="small", source="code"
    )
    model = reg.resolve_model(named, purpose="sub")
    assert (model.name, model.max_output_tokens, model.profile, model.purpose) == (
        "small-model",
        256,
        "small",
        "sub",
    )
    inline = named.model_copy(update={"model_profile": {"temperature": 0.7}})
    warm = reg.resolve_model(inline, purpose="fork")
    assert (warm.name, warm.temperature) == ("test-model", 0.7)
    forced = reg.resolve_model(named, purpose="sub", policy={"name": "policy-model"})
    assert (forced.name, forced.max_output_tokens) == ("policy-model", 256)
    assert forced.source.endswith("+ runtime policy")


# ---- result contract -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"summary": "whole"}', {"summary": "whole"}),
        ('  {"a": 1}\n', {"a": 1}),
        ('text\n```json\n{"a": 1}\n```\nmore\n```json\n{"b": 2}\n```', {"b": 2}),
        ('```JSON\n{"c": 3}\n```', {"c": 3}),
        ('```json\n{"a": 1}\n```\n```json\nnot json\n```', None),
        ("```json\n[1, 2]\n```", None),
        ("plain prose", None),
        ("", None),
    ],
)
def test_structured_output(text: str, expected: dict[str, Any] | None) -> None:
    assert structured_output(text) == expected


def test_build_result_contract() -> None:
    long_text = "x" * 5000
    result = build_result(
        run_status=RunStatus.completed,
        final_text=long_text,
        output=None,
        error=None,
        artifacts=[],
        metadata={"end_reason": "completed"},
    )
    assert result.status == "completed" and result.summary == "x" * 4000
    assert result.findings == [] and result.proposed_actions == [] and "output" not in result.metadata
    output = {"status": "failed", "summary": "s", "findings": ["f"], "proposed_actions": "not a list"}
    failed = build_result(
        run_status=RunStatus.completed, final_text="t", output=output, error=None, artifacts=[], metadata={}
    )
    assert (failed.status, failed.summary, failed.findings, failed.proposed_actions) == (
        "failed",
        "s",
        ["f"],
        [],
    )
    assert failed.metadata["output"] == output
    error = ErrorPayload(code=ErrorCode.timeout, message="too slow")
    aborted = build_result(
        run_status=RunStatus.aborted,
        final_text="",
        output=None,
        error=error,
        artifacts=[],
        metadata={},
        step_id="s1",
    )
    assert (aborted.status, aborted.summary, aborted.step_id) == ("failed", "too slow", "s1")
    cancelled = build_result(
        run_status=RunStatus.cancelled, final_text="", output=None, error=None, artifacts=[], metadata={}
    )
    assert cancelled.status == "cancelled"


def test_run_error_mapping() -> None:
    provider = ErrorPayload(code=ErrorCode.provider_error, message="boom")
    assert run_error(RunStatus.completed, None, timed_out=False, end_reason="completed") is None
    assert run_error(RunStatus.failed, provider, timed_out=False, end_reason="failed") == provider
    max_turns = run_error(RunStatus.failed, None, timed_out=False, end_reason="max_turns")
    assert (
        max_turns is not None
        and max_turns.code == ErrorCode.internal_error
        and "max_turns" in max_turns.message
    )
    timeout = run_error(RunStatus.aborted, None, timed_out=True, end_reason="aborted_streaming")
    assert timeout is not None and timeout.code == ErrorCode.timeout
    cancelled = run_error(RunStatus.cancelled, None, timed_out=False, end_reason="aborted_tools")
    assert cancelled is not None and cancelled.code == ErrorCode.cancelled


def test_schema_problems() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert schema_problems(schema, {"n": 1}) == []
    assert schema_problems(schema, {"n": "x"}) == [
        {"path": "$.n", "message": "expected an integer, got string"}
    ]
    assert schema_problems(schema, None)[0]["path"] == "$"


def test_delegation_text_sections() -> None:
    text = delegation_text("delegated_task", [("task", "T"), ("context", None), ("constraints", "- a")])
    assert (
        text == "<delegated_task>\n<task>\nT\n</task>\n<constraints>\n- a\n</constraints>\n</delegated_task>"
    )
