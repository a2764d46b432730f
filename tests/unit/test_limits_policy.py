"""The pure limits policy (loop/_limits.py): shared budget, breaches, cost, repeat detection."""

from __future__ import annotations

import pytest

from agent_core._loop._limits import (
    Budget,
    LimitConfig,
    RepeatDetector,
    RunLimits,
    usage_of_record,
    usage_record,
)
from agent_core.config._pricing import Prices, cost_usd
from agent_core.config.loader import load_config
from agent_core.config.schema import Settings
from agent_core.errors import ConfigError
from agent_core.types.content import TextBlock
from agent_core.types.enums import EndReason
from agent_core.types.model import ToolCall, Usage
from agent_core.types.tools import ToolResult
from tests.fixtures.env import SoongEnv


def call(name: str = "t", **args: object) -> ToolCall:
    return ToolCall(tool_call_id="c", name=name, arguments=dict(args))


def result(text: str, *, error: bool = False) -> ToolResult:
    return ToolResult(tool_call_id="c", tool_name="t", content=[TextBlock(text=text)], is_error=error)


def test_cost_and_usage_record() -> None:
    usage = Usage(input_tokens=2_000, output_tokens=500, total_tokens=2_500)
    assert cost_usd(usage, Prices()) is None
    assert cost_usd(usage, Prices(3.0, 15.0)) == pytest.approx(0.006 + 0.0075)
    assert cost_usd(usage, Prices(input_per_mtok=1.0)) == pytest.approx(0.002)
    record = usage_record(usage, 0.0135)
    assert record["cost_usd"] == 0.0135 and record["total_tokens"] == 2_500


def test_budget_is_shared_and_reports_the_first_spent_limit() -> None:
    clock = [100.0]
    budget = Budget(LimitConfig(max_total_tokens=100, max_wall_time_ms=5_000), clock=lambda: clock[0])
    parent = RunLimits(budget=budget)
    child = RunLimits(budget=budget, prices=Prices(1.0, 1.0))
    parent.record_usage(Usage(input_tokens=40, output_tokens=10, total_tokens=50))
    assert parent.before_model_call() is None
    child.record_usage(Usage(input_tokens=40, output_tokens=10, total_tokens=50))
    breach = parent.before_model_call()
    assert breach is not None and (breach.limit, breach.value, breach.used) == ("max_total_tokens", 100, 100)
    assert breach.end_reason == EndReason.limit_reached
    error = breach.error()
    assert error.details == {"limit": "max_total_tokens", "value": 100, "used": 100}
    assert "limits.max_total_tokens" in error.message
    fresh = Budget(LimitConfig(max_wall_time_ms=5_000), clock=lambda: clock[0])
    clock[0] += 5.0
    wall = RunLimits(budget=fresh).before_model_call()
    assert wall is not None and wall.limit == "max_wall_time_ms" and wall.used == 5_000


def test_tool_call_admission_counts_whole_turns() -> None:
    limits = RunLimits(budget=Budget(LimitConfig(max_tool_calls=3)))
    assert limits.admit_tool_calls(2) is None
    refused = limits.admit_tool_calls(2)
    assert refused is not None and refused.limit == "max_tool_calls" and refused.used == 4
    assert limits.budget.tool_calls == 2  # a refused turn is not counted
    assert limits.admit_tool_calls(1) is None
    spent = limits.before_model_call()
    assert spent is not None and spent.limit == "max_tool_calls"


def test_cost_limit() -> None:
    limits = RunLimits(budget=Budget(LimitConfig(max_cost_usd=0.01)), prices=Prices(10_000.0, 0.0))
    limits.record_usage(Usage(input_tokens=1, output_tokens=0, total_tokens=1))
    spent = limits.before_model_call()
    assert spent is not None and spent.limit == "max_cost_usd"


def test_compaction_runs_count_but_are_never_stopped() -> None:
    budget = Budget(LimitConfig(max_total_tokens=10, max_tool_calls=1))
    compact = RunLimits(budget=budget, enforce=False)
    compact.record_usage(Usage(input_tokens=50, output_tokens=0, total_tokens=50))
    assert compact.before_model_call() is None and compact.admit_tool_calls(5) is None
    assert RunLimits(budget=budget).before_model_call() is not None


def test_repeat_detector_warns_at_the_limit_then_detects_the_next_repeat() -> None:
    detector = RepeatDetector(3)
    verdicts = [detector.observe(call(x=1), result("same")) for _ in range(5)]
    assert verdicts == ["ok", "ok", "warn", "loop", "loop"]


def test_repeat_detector_needs_same_tool_args_and_result_in_a_row() -> None:
    detector = RepeatDetector(2)
    assert detector.observe(call(x=1), result("a")) == "ok"
    assert detector.observe(call(x=1), result("b")) == "ok"  # another result
    assert detector.observe(call(x=2), result("b")) == "ok"  # other arguments
    assert detector.observe(call("u", x=2), result("b")) == "ok"  # other tool
    assert detector.observe(call("u", x=2), result("b", error=True)) == "ok"  # error vs success
    assert detector.observe(call("u", x=2), result("b", error=True)) == "warn"
    assert detector.observe(call("u", x=3), result("b", error=True)) == "ok"  # the streak breaks
    assert detector.observe(call("u", x=2), result("b", error=True)) == "ok"
    assert detector.observe(call("u", x=2), result("b", error=True)) == "loop"  # warned once already


def test_after_tools_matches_results_by_call_id_in_call_order() -> None:
    limits = RunLimits(budget=Budget(LimitConfig(repeat_tool_call_limit=2)))
    calls = [ToolCall(tool_call_id=f"c{i}", name="t", arguments={"x": 1}) for i in range(3)]
    results = [
        ToolResult(tool_call_id=f"c{i}", tool_name="t", content=[TextBlock(text="r")]) for i in (2, 1, 0)
    ]
    verdict = limits.after_tools(calls, results)
    assert verdict.breach is not None and verdict.breach.end_reason == EndReason.loop_detected
    assert verdict.breach.error().details["tool_name"] == "t"


def test_limits_config_keys_and_legacy_max_turns(soong_env: SoongEnv) -> None:
    base = {"model": {"provider": "fake", "name": "m"}}
    assert Settings.model_validate(base).limits.max_turns == 50
    legacy = Settings.model_validate({**base, "runtime": {"max_turns": 7}})
    assert legacy.limits.max_turns == 7
    both = Settings.model_validate({**base, "runtime": {"max_turns": 7}, "limits": {"max_turns": 3}})
    assert both.limits.max_turns == 3
    assert Settings.model_validate(base).limits.repeat_tool_call_limit == 3
    soong_env.write_config(limits={"max_cost_usd": -1, "repeat_tool_call_limit": 1})
    with pytest.raises(ConfigError) as info:
        load_config(project_dir=soong_env.project)
    keys = {item["key"] for item in info.value.details["errors"]}
    assert keys == {"limits.max_cost_usd", "limits.repeat_tool_call_limit"}
    assert "limits.max_cost_usd" in info.value.message


def test_telemetry_config_defaults_expand_the_home(soong_env: SoongEnv) -> None:
    soong_env.write_config(telemetry={"enabled": True, "exporter": "jsonl"})
    settings = load_config(project_dir=soong_env.project).settings
    assert settings.telemetry.path == soong_env.home / "traces.jsonl"
    assert (
        settings.telemetry.endpoint == "http://127.0.0.1:4318" and settings.telemetry.capture_content is False
    )
    soong_env.write_config(telemetry={"exporter": "zipkin"})
    with pytest.raises(ConfigError) as info:
        load_config(project_dir=soong_env.project)
    assert "telemetry.exporter" in info.value.message


def test_cost_prices_each_part_of_the_input_and_the_cost_limit_counts_it() -> None:
    # 10,000 prompt tokens: 1,000 uncached, 8,000 read from the provider's cache, 1,000 written to it
    usage = Usage(input_tokens=10_000, output_tokens=100, cache_read_tokens=8_000, cache_write_tokens=1_000)
    assert usage.uncached_input_tokens == 1_000
    split = Prices(3.0, 15.0, cache_read_per_mtok=0.3, cache_write_per_mtok=3.75)
    assert cost_usd(usage, split) == pytest.approx((1_000 * 3 + 8_000 * 0.3 + 1_000 * 3.75 + 100 * 15) / 1e6)
    # unset cache prices: the input price (an upper bound)
    assert cost_usd(usage, Prices(3.0, 15.0)) == pytest.approx((10_000 * 3 + 100 * 15) / 1e6)
    record = usage_record(usage, 0.0)
    assert (record["uncached_input_tokens"], record["cache_read_tokens"], record["cache_write_tokens"]) == (
        1_000,
        8_000,
        1_000,
    )
    assert usage_of_record(record) == usage  # the derived fields are left out when read back
    # max_cost_usd counts the split cost: 0.0105 spent, so a 0.011 limit is not reached and 0.0104 is
    for limit, reached in ((0.011, False), (0.0104, True)):
        limits = RunLimits(budget=Budget(LimitConfig(max_cost_usd=limit)), prices=split)
        limits.record_usage(usage)
        assert (limits.before_model_call() is not None) is reached, limit


def test_prices_for_a_model_follow_the_provider_cache_rules() -> None:
    from agent_core.config.model import ResolvedModelConfig, RetryConfig

    def model(provider: str, **extra: object) -> ResolvedModelConfig:
        base = {"provider": provider, "base_url": "", "api_key_env": "", "name": "m", "context_window": 8192}
        fields = {"max_output_tokens": 1024, "temperature": None, "timeout_ms": 1000, "retry": RetryConfig()}
        return ResolvedModelConfig.model_validate({**base, **fields, "price_input_per_mtok": 3.0, **extra})

    anthropic = Prices.for_model(model("anthropic"))
    assert (anthropic.cache_read_per_mtok, anthropic.cache_write_per_mtok) == pytest.approx((0.3, 3.75))
    hour = Prices.for_model(model("anthropic", prompt_cache_ttl="1h"))
    assert hour.cache_write_per_mtok == pytest.approx(6.0)
    openai = Prices.for_model(model("openai"))
    assert (openai.cache_read_per_mtok, openai.cache_write_per_mtok) == (None, None)
    explicit = Prices.for_model(model("openai", price_cache_read_per_mtok=1.5))
    assert explicit.cache_read_per_mtok == 1.5
