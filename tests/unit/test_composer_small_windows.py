"""Small windows (issue 13): the output reservation is a cap that shrinks down to a floor, static system
blocks and tool descriptions degrade by priority before a run is refused, and the refusal carries figures.
"""

from __future__ import annotations

from typing import Any

from agent_core._context.composer import ComposeInput, ComposeLimits, compose
from agent_core._context.render import RenderCache
from agent_core.types.model import SystemBlock
from tests.unit.test_composer import node

STATIC_IDS = (
    ("system.core", 0),
    ("system.tool_protocol", 10),
    ("system.todo", 20),
    ("system.permissions", 30),
    ("system.multi_agent", 40),
    ("system.memory", 50),
    ("system.compact", 60),
    ("runtime.role", 62),
    ("runtime.tool_catalog", 64),
    ("instruction_catalog", 70),
)


def static_blocks(tokens: int = 100) -> list[SystemBlock]:
    return [
        SystemBlock(
            block_id=b, source="core", content=f"# {b}\n" + "x" * (tokens * 4 - len(b) - 3), priority=p
        )
        for b, p in STATIC_IDS
    ]


def compose_with(window: int, *, cap: int = 4096, floor: int = 512, **kw: Any) -> Any:
    user = node("user", "hello", run_id="run_now", node_id="node_user")
    inp = ComposeInput(
        static_blocks=kw.pop("static", static_blocks()),
        dynamic_blocks=kw.pop("dynamic", []),
        path=kw.pop("path", [user]),
        limits=ComposeLimits(
            context_window=window,
            reserve_output_tokens=cap,
            min_output_tokens=floor,
            dynamic_system_budget=kw.pop("dyn", 12000),
        ),
        current_run_id="run_now",
        current_user_node_id="node_user",
        tool_tokens=kw.pop("tool_tokens", 0),
        tool_tokens_short=kw.pop("tool_tokens_short", None),
    )
    assert not kw
    return compose(inp, RenderCache())


def test_a_prompt_that_fits_with_the_full_reservation_keeps_it() -> None:
    comp = compose_with(100_000)
    assert comp.fits
    assert comp.budget.reserve_output_tokens == 4096
    assert [b.block_id for b in comp.system] == [b for b, _ in STATIC_IDS]


def test_the_reservation_shrinks_to_what_is_left() -> None:
    # 10 x 100 static tokens + ~6 message tokens: a 4000 window leaves ~2994 for the output (< cap 4096)
    comp = compose_with(4000)
    assert comp.fits and not comp.static_overflow
    assert [b.block_id for b in comp.system] == [b for b, _ in STATIC_IDS]  # nothing degraded
    assert comp.budget.reserve_output_tokens == 4000 - comp.total_tokens
    assert 512 <= comp.budget.reserve_output_tokens < 4096


def test_dynamic_blocks_use_the_room_the_shrunk_reservation_leaves() -> None:
    state = SystemBlock(
        block_id="runtime_state", source="runtime_state", content="s" * 200, priority=140, dynamic=True
    )
    comp = compose_with(4000, dynamic=[state])
    assert comp.fits
    assert "runtime_state" in [b.block_id for b in comp.system]
    assert comp.budget.reserve_output_tokens >= 512


def test_static_blocks_degrade_from_the_highest_priority_number_and_core_stays() -> None:
    # room for static = 1300 - 512 floor - ~6 message tokens: about 7.8 of the 10 blocks
    comp = compose_with(1300)
    assert comp.fits and not comp.static_overflow
    ids = [b.block_id for b in comp.system]
    assert ids[:7] == [b for b, _ in STATIC_IDS[:7]]
    assert "instruction_catalog" not in ids and "runtime.tool_catalog" not in ids
    assert comp.budget.reserve_output_tokens >= 512
    reports = {r.block_id: r for r in comp.system_reports}
    assert reports["instruction_catalog"].selected is False
    assert reports["instruction_catalog"].reason == "degraded"
    assert comp.total_tokens + comp.budget.reserve_output_tokens <= 1300


def test_a_partly_fitting_static_block_is_truncated_with_a_marker() -> None:
    comp = compose_with(1250)
    truncated = [b for b in comp.system if b.metadata.get("truncated")]
    assert len(truncated) == 1
    assert "truncated" in truncated[0].content
    assert comp.total_tokens + comp.budget.reserve_output_tokens <= 1250


def test_tool_descriptions_shorten_at_the_tool_catalog_priority() -> None:
    # tools: 2000 tokens in full, 600 with one-line descriptions
    comp = compose_with(3400, tool_tokens=2000, tool_tokens_short=600)
    assert comp.fits
    assert comp.short_tool_descriptions
    ids = [b.block_id for b in comp.system]
    assert "runtime.tool_catalog" not in ids and "instruction_catalog" not in ids
    assert "runtime.role" in ids  # degradation stopped as soon as the prompt fit
    assert comp.budget.static_system_tokens == 800 + 600
    roomy = compose_with(100_000, tool_tokens=2000, tool_tokens_short=600)
    assert not roomy.short_tool_descriptions


def test_a_window_too_small_even_after_degradation_is_refused_with_figures() -> None:
    comp = compose_with(400, tool_tokens=2000, tool_tokens_short=600)
    assert comp.static_overflow and not comp.fits
    # the smallest prompt the composer can build: system.core + short tool schemas + the message
    assert comp.min_prompt_tokens >= 100 + 600
    assert comp.budget.reserve_output_tokens == 512
    assert comp.budget.context_window == 400


def test_the_floor_never_exceeds_the_cap() -> None:
    comp = compose_with(1200, cap=256, floor=512)
    assert comp.fits
    assert comp.budget.reserve_output_tokens == 256
