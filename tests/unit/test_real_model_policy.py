"""Pure policy of issue 34: which request fields a model accepts (``providers/_model_fields.py``), media
sniffing / sizes / downscaling (``_media.py``), the estimate's correction (``_context/calibration.py``)."""

from __future__ import annotations

import io
import sys

import pytest

from agent_core._context.calibration import TokenCalibration
from agent_core._media import MediaError, MediaLimits, MediaPolicy, image_size, prepare_media, sniff
from agent_core.config.model import ResolvedModelConfig, RetryConfig
from agent_core.providers._model_fields import FieldsError, media_problem, request_fields
from agent_core.types.content import DocumentBlock, ImageBlock, TextBlock
from agent_core.types.model import ModelMessage, ModelRequest, ToolChoiceNamed
from tests.fixtures.real_models import PDF, png


def config(provider: str, **extra: object) -> ResolvedModelConfig:
    values: dict[str, object] = {
        "provider": provider,
        "base_url": "",
        "api_key_env": "",
        "name": "m",
        "context_window": 100_000,
        "max_output_tokens": 8192,
        "temperature": 0.2,
        "timeout_ms": 1000,
        "retry": RetryConfig(),
    }
    values.update(extra)
    return ResolvedModelConfig.model_validate(values)


def request(*blocks: object, **extra: object) -> ModelRequest:
    content = list(blocks) or [TextBlock(text="hi")]
    fields: dict[str, object] = {"temperature": 0.2, "max_output_tokens": 8192, **extra}
    return ModelRequest(model="m", messages=[ModelMessage(role="user", content=content)], **fields)  # type: ignore[arg-type]


def test_openai_fields_follow_reasoning() -> None:
    plain = request_fields("openai", config("openai"), request())
    assert (plain.temperature, plain.token_field, plain.reasoning_effort) == (0.2, "max_tokens", None)
    reasoning = request_fields("openai", config("openai", reasoning_effort="low"), request())
    assert (reasoning.temperature, reasoning.token_field, reasoning.reasoning_effort) == (
        None,
        "max_completion_tokens",
        "low",
    )
    assert reasoning.notes  # says why the temperature was left out
    forced = request_fields("openai", config("openai", openai_token_field="max_completion_tokens"), request())
    assert (forced.temperature, forced.token_field) == (0.2, "max_completion_tokens")
    responses = request_fields(
        "openai_responses", config("openai_responses", reasoning_effort="high"), request()
    )
    assert (responses.token_field, responses.temperature, responses.reasoning_effort) == (
        "max_output_tokens",
        None,
        "high",
    )


def test_anthropic_thinking_rules() -> None:
    thinking = request_fields("anthropic", config("anthropic", thinking_budget_tokens=2048), request())
    assert (thinking.thinking_budget, thinking.temperature) == (2048, None)
    window_left = request_fields(
        "anthropic", config("anthropic", thinking_budget_tokens=4096), request(max_output_tokens=2000)
    )
    assert window_left.thinking_budget == 1999  # below max_tokens
    tight = request_fields(
        "anthropic", config("anthropic", thinking_budget_tokens=4096), request(max_output_tokens=900)
    )
    assert tight.thinking_budget is None and tight.temperature == 0.2
    forced = request_fields(
        "anthropic",
        config("anthropic", thinking_budget_tokens=2048),
        request(tool_choice=ToolChoiceNamed(name="t")),
    )
    assert forced.thinking_budget is None and "forces a tool" in forced.notes[0]
    with pytest.raises(FieldsError, match="minimum of 1024"):
        request_fields("anthropic", config("anthropic", thinking_budget_tokens=500), request())
    with pytest.raises(FieldsError, match=r"model\.max_output_tokens"):
        request_fields("anthropic", config("anthropic", thinking_budget_tokens=9000), request())


def test_ollama_think() -> None:
    assert request_fields("ollama", config("ollama"), request()).think is None
    assert request_fields("ollama", config("ollama", thinking_budget_tokens=1), request()).think is True
    assert request_fields("ollama", config("ollama", reasoning_effort="high"), request()).think == "high"


def test_media_problems_name_the_key() -> None:
    image = ImageBlock(artifact_id="artifact_a", mime_type="image/png")
    document = DocumentBlock(artifact_id="artifact_b")
    with_bytes = {"attachments": {"artifact_a": b"x", "artifact_b": b"y"}}
    problem = media_problem("openai", config("openai"), request(image, **with_bytes))
    assert problem is not None and problem[0] == "image" and "model.input_modalities" in problem[1]
    assert (
        media_problem(
            "openai", config("openai", input_modalities=("text", "image")), request(image, **with_bytes)
        )
        is None
    )
    pdf = config("ollama", input_modalities=("text", "pdf"))
    problem = media_problem("ollama", pdf, request(document, **with_bytes))
    assert problem is not None and "PDF" in problem[1]
    missing = media_problem("openai", config("openai", input_modalities=("text", "image")), request(image))
    assert missing is not None and "artifact_a" in missing[1]


def test_sniff_and_header_sizes() -> None:
    from PIL import Image

    assert sniff(png(3, 2)) == "image/png" and image_size(png(3, 2), "image/png") == (3, 2)
    assert sniff(PDF) == "application/pdf" and sniff(b"hello") is None
    for fmt, mime in (("GIF", "image/gif"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")):
        buffer = io.BytesIO()
        Image.new("RGB", (37, 21), (1, 2, 3)).save(buffer, format=fmt)
        data = buffer.getvalue()
        assert sniff(data) == mime
        assert image_size(data, mime) == (37, 21), fmt


def test_images_within_limits_are_kept_byte_for_byte_and_big_ones_downscaled() -> None:
    small = png(100, 50)
    assert prepare_media(small, MediaLimits(image_max_edge_px=200)).data == small
    done = prepare_media(png(400, 100), MediaLimits(image_max_edge_px=200))
    assert (done.width, done.height, done.downscaled_from) == (200, 50, (400, 100))
    assert image_size(done.data, done.mime_type) == (200, 50)
    with pytest.raises(MediaError, match=r"model\.pdf_max_bytes"):
        prepare_media(PDF + b"x" * 2048, MediaLimits(pdf_max_bytes=1024))
    with pytest.raises(MediaError, match="not an image"):
        prepare_media(b"plain text", MediaLimits())


def test_without_pillow_a_big_image_is_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # as if the images extra were not installed
    with pytest.raises(MediaError, match=r"soong-agent\[images\]"):
        prepare_media(png(400, 100), MediaLimits(image_max_edge_px=200))
    assert prepare_media(png(100, 50), MediaLimits(image_max_edge_px=200)).width == 100  # no Pillow needed


def test_media_policy() -> None:
    policy = MediaPolicy(("text", "image"))
    assert (
        policy.takes("image/png")
        and not policy.takes("application/pdf")
        and not policy.takes("image/svg+xml")
    )


def test_calibration_learns_within_bounds() -> None:
    calibration = TokenCalibration()
    assert calibration.factor("p", "m") == 1.0
    assert calibration.observe("p", "m", 1000, 10) is None  # a made-up count is not learned
    assert calibration.observe("p", "m", 100, 300) is None  # too small a prompt to say anything
    assert calibration.observe("p", "m", 1000, 1500) == 1.5
    assert calibration.observe("p", "m", 1000, 1300) == 1.4
    assert calibration.factor("p", "other") == 1.0
    assert calibration.overflowed("p", "m", 1000, 2000) == pytest.approx(2.1)
    assert calibration.overflowed("p", "m", 1000, None) == pytest.approx(2.1)  # no figures: unchanged
