"""Pure retry policy and error classification (docs/providers.md#errors-and-retries)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from agent_core.config.model import RetryConfig
from agent_core.providers._streaming import (
    RetryLog,
    StreamProtocolError,
    backoff_ceiling_ms,
    backoff_ms,
    body_excerpt,
    body_message,
    classify_exception,
    parse_retry_after,
    status_error_type,
)
from agent_core.providers.base import ERROR_TYPES, error_payload, mentions_tools_unsupported


def test_backoff_sequence_defaults() -> None:
    retry = RetryConfig()
    assert [backoff_ceiling_ms(retry, n) for n in (1, 2, 3)] == [500, 1000, 2000]
    assert [backoff_ceiling_ms(retry, n) for n in (4, 5, 6, 7)] == [4000, 8000, 8000, 8000]
    tiny = RetryConfig(initial_backoff_ms=10, max_backoff_ms=50)
    assert [backoff_ceiling_ms(tiny, n) for n in range(1, 6)] == [10, 20, 40, 50, 50]
    assert [backoff_ms(retry, n, lambda: 0.999999) for n in (1, 2, 7)] == [500, 1000, 8000]
    assert [backoff_ms(retry, n, lambda: 0.0) for n in (1, 2, 7)] == [0, 0, 0]


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "0"}) == 0
    assert parse_retry_after({"retry-after": "2"}) == 2000
    assert parse_retry_after({"Retry-After": "1.5"}) == 1500
    assert parse_retry_after({"Retry-After": "3600"}) == 60000  # capped
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 250
    now = datetime(2026, 1, 1, tzinfo=UTC)
    date = format_datetime(now + timedelta(seconds=5), usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == 5000
    past = format_datetime(now - timedelta(seconds=5), usegmt=True)
    assert parse_retry_after({"Retry-After": past}, now=now) == 0
    assert parse_retry_after({"Retry-After": "soon"}) is None


@pytest.mark.parametrize(
    ("status", "type_"),
    [
        (401, "auth"),
        (403, "auth"),
        (429, "rate_limit"),
        (408, "timeout"),
        (500, "server"),
        (503, "server"),
        (529, "server"),
        (400, "invalid_request"),
        (404, "invalid_request"),
        (413, "invalid_request"),
        (422, "invalid_request"),
    ],
)
def test_status_classification(status: int, type_: str) -> None:
    assert status_error_type(status) == type_


def test_classification_table_codes_and_retryability() -> None:
    expected = {
        "unsupported_capability": ("unsupported_capability", False),
        "auth": ("provider_auth_failed", False),
        "rate_limit": ("provider_rate_limited", True),
        "timeout": ("provider_timeout", True),
        "server": ("provider_error", True),
        "network": ("provider_error", True),
        "invalid_request": ("provider_error", False),
        "config": ("config_error", False),
        "protocol": ("provider_error", False),
        "closed": ("provider_error", False),
        "internal": ("internal_error", False),
        "prompt_too_long": ("validation_error", False),  # issue 34: compacted and retried by the loop
    }
    assert {k: (v[0].value, v[1]) for k, v in ERROR_TYPES.items()} == expected
    payload = error_payload("rate_limit", "slow down", provider="openai", model="m", status_code=429)
    assert (payload.code, payload.retryable, payload.status_code) == ("provider_rate_limited", True, 429)


def test_exception_classification() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/")
    assert classify_exception(httpx.ReadTimeout("t", request=request))[0] == "timeout"
    assert classify_exception(httpx.ConnectTimeout("t", request=request))[0] == "timeout"
    assert classify_exception(httpx.ConnectError("refused", request=request))[0] == "network"
    assert classify_exception(httpx.RemoteProtocolError("peer closed", request=request))[0] == "network"
    assert classify_exception(httpx.ReadError("reset", request=request))[0] == "network"
    assert classify_exception(StreamProtocolError("bad chunk"))[0] == "protocol"
    assert classify_exception(KeyError("x"))[0] == "internal"


def test_retry_log_shape() -> None:
    log = RetryLog(3)
    log.attempts = 1
    err = error_payload("rate_limit", "429", status_code=429, retry_after_ms=0)
    assert log.can_retry(err)
    log.record(err, 0)
    log.attempts = 2
    log.last_error = err
    meta = log.as_metadata()
    assert meta["attempts"] == 2 and meta["max_attempts"] == 3
    assert meta["retries"] == [
        {
            "attempt": 1,
            "error_type": "rate_limit",
            "code": "provider_rate_limited",
            "status_code": 429,
            "backoff_ms": 0,
            "retry_after_ms": 0,
        }
    ]
    assert meta["last_error"]["code"] == "provider_rate_limited"
    log.attempts = 3
    assert not log.can_retry(err)
    assert not RetryLog(3).can_retry(error_payload("auth", "401"))


def test_error_body_helpers_and_tools_unsupported_detection() -> None:
    assert body_message(body_excerpt('{"error": {"message": "bad key", "type": "x"}}')) == "bad key"
    assert body_message(body_excerpt('{"error": "model not found"}')) == "model not found"
    assert body_excerpt("<html>oops</html>") == {"text": "<html>oops</html>"}
    assert mentions_tools_unsupported('"gemma" does not support tools')
    assert mentions_tools_unsupported("This model does not support function calling")
    assert mentions_tools_unsupported("tools are not supported by this model")
    assert not mentions_tools_unsupported("invalid value for temperature")
