"""Tool-name mangling (docs/providers.md#tool-names) and content rendering
(docs/providers.md#content-sent-as-text)."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given
from hypothesis import strategies as st

from agent_core.errors import ErrorCode
from agent_core.providers._tool_mapping import (
    ToolNameMap,
    conversation,
    render_block,
    render_blocks,
    render_tool_result,
    system_texts,
)
from agent_core.types.content import (
    ArtifactRefBlock,
    ErrorPayload,
    JsonBlock,
    TextBlock,
    ToolResultBlock,
)
from agent_core.types.model import ModelMessage
from tests.fixtures.provider_requests import (
    assistant,
    call_block,
    make_request,
    result_block,
    system_blocks,
    tool,
    tool_message,
    user,
)

PROVIDER_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_mangling_unique_safe_and_reversible() -> None:
    names = [
        "a.b",
        "a__b",
        "code.read_file",
        "internal.load_skill",
        "mcp.my-server.do thing!",
        "mcp." + "x" * 80 + ".tool",
        "plain",
    ]
    mapping = ToolNameMap(names)
    mangled = [mapping.mangle(n) for n in names]
    assert len(set(mangled)) == len(names)
    assert all(PROVIDER_SAFE.match(m) for m in mangled), mangled
    assert [mapping.unmangle(m) for m in mangled] == names
    # the two colliding names both get the hashed form; the others keep the base form
    assert mapping.mangle("code.read_file") == "code__read_file"
    assert mapping.mangle("internal.load_skill") == "internal__load_skill"
    digest = hashlib.sha1(b"a.b").hexdigest()[:8]
    assert mapping.mangle("a.b") == f"a__b_{digest}"
    assert mapping.mangle("mcp.my-server.do thing!").startswith("mcp__my-server__do_thing_")
    long_form = mapping.mangle("mcp." + "x" * 80 + ".tool")
    assert len(long_form) == 64 and long_form[:55] == ("mcp__" + "x" * 80)[:55]


def test_unknown_returned_name_passes_through() -> None:
    mapping = ToolNameMap(["code.list_dir"])
    assert mapping.unmangle("code__list_dir") == "code.list_dir"
    assert mapping.unmangle("ghost__tool") == "ghost__tool"
    assert mapping.unmangle("code.list_dir") == "code.list_dir"


def test_map_covers_history_tool_names() -> None:
    request = make_request(
        tools=[tool("code.list_dir")],
        messages=[
            user("go"),
            assistant(call_block("c1", "code.removed_tool", {})),
            tool_message(result_block("c1", "ok")),
        ],
    )
    mapping = ToolNameMap.for_request(request)
    assert "code.removed_tool" in mapping and "code.list_dir" in mapping
    assert mapping.unmangle("code__removed_tool") == "code.removed_tool"


@given(st.lists(st.text(min_size=1, max_size=90), min_size=1, max_size=12, unique=True))
def test_mangling_property(names: list[str]) -> None:
    mapping = ToolNameMap(names)
    mangled = [mapping.mangle(n) for n in names]
    assert len(set(mangled)) == len(names)
    assert all(PROVIDER_SAFE.match(m) for m in mangled)
    assert [mapping.unmangle(m) for m in mangled] == names


def test_render_blocks_per_spec() -> None:
    assert render_block(TextBlock(text="hi")) == "hi"
    assert render_block(JsonBlock(data={"a": [1, 2]})) == '{"a":[1,2]}'
    assert (
        render_block(JsonBlock(summary="big table", artifact_id="artifact_1"))
        == "big table\n[artifact artifact_1]"
    )
    assert (
        render_block(ArtifactRefBlock(artifact_id="artifact_2", summary="log"))
        == "[artifact artifact_2: log]"
    )
    ref = ArtifactRefBlock(artifact_id="artifact_3", summary="img", mime_type="image/png")
    assert render_block(ref) == "[artifact artifact_3: img (image/png)]"
    assert render_blocks([TextBlock(text="a"), TextBlock(text=""), JsonBlock(data=1)]) == "a\n1"


def test_render_tool_result_error_prefix_only_without_provider_flag() -> None:
    err = ToolResultBlock(
        tool_call_id="c1",
        is_error=True,
        content=[],
        error=ErrorPayload(code=ErrorCode.file_not_found, message="no such file: a.txt"),
    )
    assert (
        render_tool_result(err, provider_has_error_flag=False) == "[error file_not_found] no such file: a.txt"
    )
    assert render_tool_result(err, provider_has_error_flag=True) == "no such file: a.txt"
    ok = result_block("c2", "content")
    assert render_tool_result(ok, provider_has_error_flag=False) == "content"


def test_conversation_merges_tool_messages_in_call_order() -> None:
    messages = [
        user("go"),
        assistant(call_block("c1", "a.x", {}), call_block("c2", "a.y", {}), call_block("c3", "a.z", {})),
        tool_message(result_block("c3", "three")),
        tool_message(result_block("c1", "one"), result_block("zz", "orphan")),
        tool_message(result_block("c2", "two")),
        ModelMessage(role="system", content=[TextBlock(text="extra system")]),
        user("next"),
    ]
    out = conversation(messages)
    assert [m.role for m in out] == ["user", "assistant", "tool", "user"]
    ids = [b.tool_call_id for b in out[2].content if isinstance(b, ToolResultBlock)]
    assert ids == ["c1", "c2", "c3", "zz"]
    request = make_request(system=system_blocks("core"), messages=messages)
    assert system_texts(request) == ["core", "extra system"]


def test_json_results_leave_top_level_null_fields_out_of_the_prompt() -> None:
    """Absent means null: a tool result's null fields are not paid for at every later request (issue 33);
    nested nulls and non-object data are sent as they are."""
    block = JsonBlock(data={"path": "a.txt", "next_start_line": None, "nested": {"x": None}, "flag": False})
    assert render_block(block) == '{"path":"a.txt","nested":{"x":null},"flag":false}'
    assert render_block(JsonBlock(data=[None, 1])) == "[null,1]"
    assert render_block(JsonBlock(data={"only": None})) == "{}"
