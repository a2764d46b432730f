"""The AgentDefinition registry through the public API (docs/multi-agent.md#agent-definitions,
docs/multi-agent.md#agentlist_agent_definitions, docs/configuration.md#agents; cases I1-I6, I11-I15, I22,
I23).

Traceability: the case ids (``I5``, ``D9``) of docs/testing.md#case-catalogue are in the test docstrings.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_core import AgentCoreError, AgentDefinition, AgentRuntime, ErrorCode
from agent_core.types.content import JsonBlock
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.multi_agent import ChildRouter, child_done, instructions_text, routed_fake, tool_results
from tests.fixtures.runtime import collect, open_runtime
from tests.fixtures.tool_pipeline import PermissionRecorder

REASONS = {"disabled_by_config", "permission_denied", "mode_restricted", "policy_restricted"}


def write_def(env: SoongEnv, filename: str, body: str = "# Title\nbody", **front: Any) -> None:
    env.write_home(f"agents/{filename}", body, front)


def definition(agent_id: str, **fields: Any) -> AgentDefinition:
    values: dict[str, Any] = {"name": agent_id, "description": f"{agent_id} description", "source": "code"}
    values.update(fields)
    return AgentDefinition(agent_definition_id=agent_id, **values)


async def list_definitions(rt: AgentRuntime, fake: FakeProvider) -> list[dict[str, Any]]:
    fake.script(tool_calls(("agent.list_agent_definitions", {}, "list")), text("ok"))
    run = await rt.start("list")
    await collect(run)
    block = next(b for b in tool_results(fake.requests[-1]) if b.tool_call_id == "list")
    assert not block.is_error, block.error
    data = next(b.data for b in block.content if isinstance(b, JsonBlock))
    assert isinstance(data, dict) and set(data) == {"agent_definitions"}
    entries = data["agent_definitions"]
    assert isinstance(entries, list)
    return entries


async def startup_error(env: SoongEnv, **kwargs: Any) -> AgentCoreError:
    with pytest.raises(AgentCoreError) as err:
        async with open_runtime(env, FakeProvider(), **kwargs):
            pass
    return err.value


async def test_builtin_catalog(soong_env: SoongEnv) -> None:
    """Cases I1, I15."""
    fake = FakeProvider()
    async with open_runtime(soong_env, fake) as rt:
        entries = await list_definitions(rt, fake)
        fake.script(tool_calls(("agent.list_agent_definitions", {"verbose": True}, "bad")), text("ok"))
        await collect(await rt.start("bad args"))
    ids = [e["agent_definition_id"] for e in entries]
    assert ids == ["default_fork_agent", "default_sub_agent", "default_worker_agent"]
    for entry in entries:
        assert set(entry) == {
            "agent_definition_id",
            "name",
            "description",
            "source",
            "suggested_tools",
            "tags",
        }
        assert entry["source"] == "builtin" and "builtin" in entry["tags"]
        for tool in entry["suggested_tools"]:
            assert set(tool) <= {"name", "available", "unavailable_reason"}
            assert ("unavailable_reason" in tool) is (not tool["available"])
            assert tool.get("unavailable_reason", "disabled_by_config") in REASONS
    worker = {t["name"]: t for t in entries[2]["suggested_tools"]}
    assert worker["code.read_file"] == {"name": "code.read_file", "available": True}
    assert worker["agent.task_claim_step"] == {
        "name": "agent.task_claim_step",
        "available": False,
        "unavailable_reason": "mode_restricted",
    }
    bad = next(b for b in tool_results(fake.requests[-1]) if b.tool_call_id == "bad")
    assert bad.error is not None and bad.error.code == ErrorCode.validation_error


async def test_user_definition_body_in_system_not_description(soong_env: SoongEnv) -> None:
    """Case I2."""
    write_def(
        soong_env,
        "reviewer.md",
        "# Reviewer\nBODY-MARKER-REVIEW",
        id="reviewer",
        name="Code Reviewer",
        description="DESCRIPTION-MARKER",
        suggested_tools=["code.read_file", "code.search"],
        tags=["review", "readonly"],
    )
    router = ChildRouter().add("MARK-REV", child_done())
    fake = routed_fake(router)
    async with open_runtime(soong_env, fake) as rt:
        entries = await list_definitions(rt, fake)
        fake.script(
            tool_calls(
                ("agent.create_sub_agent", {"task": "MARK-REV", "agent_definition_id": "reviewer"}, "c")
            ),
            text("done"),
        )
        await collect(await rt.start("review"))
    reviewer = next(e for e in entries if e["agent_definition_id"] == "reviewer")
    assert reviewer["source"] == "user" and reviewer["description"] == "DESCRIPTION-MARKER"
    assert reviewer["tags"] == ["review", "readonly"] and reviewer["name"] == "Code Reviewer"
    child = router.first("MARK-REV")
    assert "BODY-MARKER-REVIEW" in instructions_text(child)
    assert "DESCRIPTION-MARKER" not in instructions_text(child)
    assert all("DESCRIPTION-MARKER" not in str(m.model_dump()) for m in child.messages)


@pytest.mark.parametrize("missing", ["id", "name", "description"])
async def test_required_frontmatter(soong_env: SoongEnv, missing: str) -> None:
    """Case I11."""
    front = {"id": "x", "name": "X", "description": "d"}
    del front[missing]
    write_def(soong_env, "x.md", **front)
    error = await startup_error(soong_env)
    assert error.code == ErrorCode.invalid_agent_definition and missing in error.message


@pytest.mark.parametrize(
    "front",
    [
        {"id": "x", "name": "X", "description": "d", "color": "red"},
        {"id": "x", "name": "", "description": "d"},
        {"id": "x", "name": "X", "description": "d", "suggested_tools": "code.read_file"},
        {"id": "x", "name": "X", "description": "d", "overrides": "builtin"},
        {"id": "x", "name": "X", "description": "d", "model_profile": "missing"},
        {"id": "x", "name": "X", "description": "d", "model_profile": {"colour": 1}},
    ],
)
async def test_invalid_frontmatter_values(soong_env: SoongEnv, front: dict[str, Any]) -> None:
    write_def(soong_env, "x.md", **front)
    assert (await startup_error(soong_env)).code == ErrorCode.invalid_agent_definition


async def test_non_mapping_frontmatter_is_invalid(soong_env: SoongEnv) -> None:
    soong_env.write_home("agents/list.md", "---\n- a\n- b\n---\n# Body\n")
    assert (await startup_error(soong_env)).code == ErrorCode.invalid_agent_definition
    (soong_env.home / "agents/list.md").write_text("# No frontmatter at all\n")
    assert (await startup_error(soong_env)).code == ErrorCode.invalid_agent_definition


async def test_suggested_tools_validation_and_availability(soong_env: SoongEnv) -> None:
    """Cases I3, I22."""
    write_def(soong_env, "bad.md", id="bad", name="B", description="d", suggested_tools=["code.nope"])
    error = await startup_error(soong_env)
    assert error.code == ErrorCode.invalid_agent_definition and "code.nope" in error.message
    (soong_env.home / "agents/bad.md").unlink()
    write_def(
        soong_env,
        "ops.md",
        id="ops",
        name="Ops",
        description="d",
        suggested_tools=["code.run_command", "code.write_file", "code.read_file", "internal.recall_memory"],
    )
    config = {"tools": {"disabled": ["code.run_command"]}}
    fake = FakeProvider()
    async with open_runtime(soong_env, fake, config=config) as rt:
        ops = next(e for e in await list_definitions(rt, fake) if e["agent_definition_id"] == "ops")
    tools = {t["name"]: t for t in ops["suggested_tools"]}
    assert tools["code.run_command"] == {
        "name": "code.run_command",
        "available": False,
        "unavailable_reason": "disabled_by_config",
    }
    assert tools["code.write_file"]["unavailable_reason"] == "permission_denied"  # no permission callback
    assert tools["code.read_file"] == {"name": "code.read_file", "available": True}
    assert tools["internal.recall_memory"]["unavailable_reason"] == "disabled_by_config"  # memory disabled
    fake2 = FakeProvider()
    async with open_runtime(
        soong_env, fake2, config=config, permission_callback=PermissionRecorder.always("allow_once")
    ) as rt:
        ops2 = next(e for e in await list_definitions(rt, fake2) if e["agent_definition_id"] == "ops")
        inspect = rt._features().agents.registry.inspect()
    tools2 = {t["name"]: t for t in ops2["suggested_tools"]}
    assert tools2["code.write_file"] == {"name": "code.write_file", "available": True}
    detail = {t["name"]: t for t in inspect["ops"]["suggested_tools"]}
    assert (
        detail["code.run_command"]["reason"] == "disabled_by_config" and detail["code.run_command"]["detail"]
    )


async def test_duplicate_user_files(soong_env: SoongEnv) -> None:
    """Case I4."""
    write_def(soong_env, "a.md", id="dup", name="A", description="d")
    write_def(soong_env, "b.md", id="dup", name="B", description="d", overrides="user:dup")
    assert (await startup_error(soong_env)).code == ErrorCode.duplicate_agent_definition


async def test_duplicate_code_registrations(soong_env: SoongEnv) -> None:
    """Case I4."""
    soong_env.write_config()
    rt = AgentRuntime(project_dir=soong_env.project, provider_registry=None)
    rt.register_agent_definition(definition("helper"))
    rt.register_agent_definition(definition("helper", overrides="code:helper"))
    with pytest.raises(AgentCoreError) as err:
        async with rt:
            pass
    assert err.value.code == ErrorCode.duplicate_agent_definition
    fake = FakeProvider()
    async with open_runtime(soong_env, fake) as rt2:
        rt2.register_agent_definition(definition("helper", body="FIRST"))
        with pytest.raises(AgentCoreError) as err2:
            rt2.register_agent_definition(definition("helper", body="SECOND", overrides="code:helper"))
        assert err2.value.code == ErrorCode.duplicate_agent_definition
        registry = rt2._features().agents.registry
        assert registry.get("helper").body == "FIRST"
        assert len(registry.inspect()["helper"]["chain"]) == 1


async def test_user_overrides_builtin(soong_env: SoongEnv) -> None:
    write_def(
        soong_env, "sub.md", "# Mine\nUSER-SUB-BODY", id="default_sub_agent", name="Mine", description="d"
    )
    assert (await startup_error(soong_env)).code == ErrorCode.duplicate_agent_definition
    write_def(
        soong_env,
        "sub.md",
        "# Mine\nUSER-SUB-BODY",
        id="default_sub_agent",
        name="Mine",
        description="d",
        overrides="builtin:default_sub_agent",
    )
    router = ChildRouter().add("MARK-S", child_done())
    fake = routed_fake(router)
    async with open_runtime(soong_env, fake) as rt:
        entries = await list_definitions(rt, fake)
        fake.script(tool_calls(("agent.create_sub_agent", {"task": "MARK-S"}, "c")), text("done"))
        await collect(await rt.start("go"))
        chain = rt._features().agents.registry.inspect()["default_sub_agent"]["chain"]
    sub = next(e for e in entries if e["agent_definition_id"] == "default_sub_agent")
    assert sub["source"] == "user" and sub["name"] == "Mine" and sub["tags"] == []
    system = instructions_text(router.first("MARK-S"))
    assert "USER-SUB-BODY" in system and "# Default Sub-Agent" not in system
    assert [c["source"] for c in chain] == ["builtin", "user"]
    assert chain[1]["overrides"] == "builtin:default_sub_agent" and chain[1]["origin"].endswith("sub.md")


@pytest.mark.parametrize(
    ("front", "code"),
    [
        ({"id": "x", "overrides": "builtin:missing_id"}, ErrorCode.invalid_agent_override),
        ({"id": "x", "overrides": "code:x"}, ErrorCode.invalid_agent_override),
        ({"id": "x", "overrides": "user:default_sub_agent"}, ErrorCode.invalid_agent_override),
        (
            {"id": "default_sub_agent", "overrides": "user:default_sub_agent"},
            ErrorCode.invalid_agent_override,
        ),
        (
            {"id": "default_sub_agent", "overrides": "builtin:default_fork_agent"},
            ErrorCode.invalid_agent_override,
        ),
        ({"id": "default_compact_agent"}, ErrorCode.invalid_agent_override),
        (
            {"id": "default_compact_agent", "overrides": "builtin:default_compact_agent"},
            ErrorCode.invalid_agent_override,
        ),
        ({"id": "x", "overrides": "builtin:default_compact_agent"}, ErrorCode.invalid_agent_override),
        ({"id": "x", "overrides": "project:x"}, ErrorCode.invalid_agent_definition),
    ],
)
async def test_user_override_errors(soong_env: SoongEnv, front: dict[str, Any], code: ErrorCode) -> None:
    """Case I13."""
    write_def(soong_env, "x.md", name="X", description="d", **front)
    assert (await startup_error(soong_env)).code == code


async def test_user_file_cannot_override_code(soong_env: SoongEnv) -> None:
    """Case I13."""
    write_def(soong_env, "x.md", id="helper", name="X", description="d", overrides="code:helper")
    soong_env.write_config()
    rt = AgentRuntime(project_dir=soong_env.project)
    rt.register_agent_definition(definition("helper", overrides="user:helper"))
    with pytest.raises(AgentCoreError) as err:
        async with rt:
            pass
    assert err.value.code == ErrorCode.invalid_agent_override


async def test_code_overrides_user_and_builtin(soong_env: SoongEnv) -> None:
    """Cases I6, I13."""
    write_def(soong_env, "reviewer.md", "# Reviewer\nUSER-BODY", id="reviewer", name="R", description="d")
    router = ChildRouter().add("MARK-CODE", child_done())
    fake = routed_fake(router)
    async with open_runtime(soong_env, fake) as rt:
        with pytest.raises(AgentCoreError) as err:
            rt.register_agent_definition(definition("reviewer", body="# Code\nCODE-BODY"))
        assert err.value.code == ErrorCode.duplicate_agent_definition
        with pytest.raises(AgentCoreError) as err2:
            rt.register_agent_definition(definition("reviewer", body="# Code", overrides="builtin:reviewer"))
        assert err2.value.code == ErrorCode.invalid_agent_override
        rt.register_agent_definition(
            definition("reviewer", body="# Code\nCODE-BODY", overrides="user:reviewer")
        )
        rt.register_agent_definition(
            definition("default_worker_agent", body="# W\nW", overrides="builtin:default_worker_agent")
        )
        entries = {e["agent_definition_id"]: e for e in await list_definitions(rt, fake)}
        fake.script(
            tool_calls(
                ("agent.create_sub_agent", {"task": "MARK-CODE", "agent_definition_id": "reviewer"}, "c")
            ),
            text("done"),
        )
        await collect(await rt.start("go"))
        inspect = rt._features().agents.registry.inspect()
    assert entries["reviewer"]["source"] == "code" and entries["default_worker_agent"]["source"] == "code"
    system = instructions_text(router.first("MARK-CODE"))
    assert "CODE-BODY" in system and "USER-BODY" not in system
    assert [(c["source"], c["overrides"]) for c in inspect["reviewer"]["chain"]] == [
        ("user", None),
        ("code", "user:reviewer"),
    ]


async def test_code_cannot_touch_the_compact_agent(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider()) as rt:
        for bad in (
            definition("default_compact_agent"),
            definition("default_compact_agent", overrides="builtin:default_compact_agent"),
            definition("mine", overrides="builtin:default_compact_agent"),
        ):
            with pytest.raises(AgentCoreError) as err:
                rt.register_agent_definition(bad)
            assert err.value.code == ErrorCode.invalid_agent_override
        inspect = rt._features().agents.registry.inspect()
    assert inspect["default_compact_agent"]["internal"] is True
    assert inspect["default_compact_agent"]["source"] == "builtin"
    assert "mine" not in inspect


@pytest.mark.parametrize("bad_id", ["Reviewer", "a/b", "a.b", "a b", "-x", "", "x" * 65])
async def test_id_rules(soong_env: SoongEnv, bad_id: str) -> None:
    """Case I11."""
    async with open_runtime(soong_env, FakeProvider()) as rt:
        with pytest.raises(AgentCoreError) as err:
            rt.register_agent_definition(definition(bad_id))
        assert err.value.code == ErrorCode.invalid_agent_definition


async def test_ids_are_kept_exactly(soong_env: SoongEnv) -> None:
    """Case I11."""
    long_id = "a" * 64
    write_def(soong_env, "zzz-file-name.md", id="my_agent-1", name="N", description="d")
    fake = FakeProvider()
    async with open_runtime(soong_env, fake) as rt:
        rt.register_agent_definition(definition(long_id))
        ids = [e["agent_definition_id"] for e in await list_definitions(rt, fake)]
    assert long_id in ids and "my_agent-1" in ids and "zzz-file-name" not in ids


async def test_tags(soong_env: SoongEnv) -> None:
    """Case I23."""
    async with open_runtime(soong_env, FakeProvider()) as rt:
        for tags in (["t" * 65], [""], [f"t{i}" for i in range(33)]):
            with pytest.raises(AgentCoreError) as err:
                rt.register_agent_definition(definition("tagged", tags=tags))
            assert err.value.code == ErrorCode.invalid_agent_definition
        rt.register_agent_definition(definition("tagged", tags=["Any Thing", "ünïcode", "x" * 64]))
        rt.register_agent_definition(definition("many", tags=[f"t{i}" for i in range(32)]))
    write_def(soong_env, "t.md", id="t", name="T", description="d", tags=[1, 2])
    assert (await startup_error(soong_env)).code == ErrorCode.invalid_agent_definition


async def test_project_agents_directory_is_ignored(soong_env: SoongEnv) -> None:
    """Case I12."""
    soong_env.write_project(
        ".soong-agent/agents/x.md", "# X", {"id": "project-x", "name": "X", "description": "d"}
    )
    fake = FakeProvider()
    async with open_runtime(soong_env, fake) as rt:
        ids = [e["agent_definition_id"] for e in await list_definitions(rt, fake)]
    assert "project-x" not in ids


async def test_source_enum(soong_env: SoongEnv) -> None:
    """Case I14."""
    with pytest.raises(ValidationError):
        AgentDefinition(agent_definition_id="x", name="x", description="d", source="project")  # type: ignore[arg-type]
    fake = FakeProvider()
    async with open_runtime(soong_env, fake) as rt:
        rt.register_agent_definition(definition("from-user", source="user"))
        entries = await list_definitions(rt, fake)
    assert {e["source"] for e in entries} <= {"builtin", "user", "code"}
    assert next(e for e in entries if e["agent_definition_id"] == "from-user")["source"] == "code"


@pytest.mark.parametrize("value", ["nope", "default_compact_agent"])
async def test_config_default_definitions_must_exist(soong_env: SoongEnv, value: str) -> None:
    error = await startup_error(soong_env, config={"agents": {"default_sub_agent_definition": value}})
    assert error.code == ErrorCode.config_error


async def test_config_default_definition_names_a_user_definition(soong_env: SoongEnv) -> None:
    write_def(soong_env, "helper.md", "# Helper\nHELPER-BODY", id="helper", name="H", description="d")
    router = ChildRouter().add("MARK-H", child_done())
    fake = routed_fake(router, tool_calls(("agent.create_sub_agent", {"task": "MARK-H"}, "c")), text("done"))
    async with open_runtime(
        soong_env, fake, config={"agents": {"default_sub_agent_definition": "helper"}}
    ) as rt:
        await collect(await rt.start("go"))
    assert "HELPER-BODY" in instructions_text(router.first("MARK-H"))
