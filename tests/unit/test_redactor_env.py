"""Redactor.secrets() re-reads os.environ on every call: a changed, removed or added value is seen."""

from __future__ import annotations

import pytest

from agent_core import _redaction as redaction
from agent_core._redaction import Redactor
from agent_core._storage.rows import redact_json_text


def test_secrets_follow_os_environ_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOONG_T_NAMED", "abcd1234")
    redactor = Redactor(["SOONG_T_NAMED"])
    assert "abcd1234" in redactor.secrets()
    assert redactor.secrets() is redactor.secrets()  # unchanged environment: the same tuple

    monkeypatch.setenv("SOONG_T_NAMED", "wxyz9876")  # same variables, another value
    assert "wxyz9876" in redactor.secrets()
    assert "abcd1234" not in redactor.secrets()

    monkeypatch.setenv("SOONG_T_NAMED", "abc")  # below the named minimum (4)
    assert "abc" not in redactor.secrets()
    assert "wxyz9876" not in redactor.secrets()

    monkeypatch.setenv("SOONG_T_API_TOKEN", "pattern-secret-1")  # a new pattern-named variable
    assert "pattern-secret-1" in redactor.secrets()
    monkeypatch.setenv("SOONG_T_API_TOKEN", "short")  # below the pattern minimum (8)
    assert "short" not in redactor.secrets()
    monkeypatch.setenv("SOONG_T_API_TOKEN", "pattern-secret-2")
    assert "pattern-secret-2" in redactor.secrets()

    monkeypatch.delenv("SOONG_T_API_TOKEN")
    assert "pattern-secret-2" not in redactor.secrets()

    monkeypatch.setenv("SOONG_T_PLAIN", "plainvalue")
    assert "plainvalue" not in redactor.secrets()
    redactor.add_secret_env("SOONG_T_PLAIN")
    assert "plainvalue" in redactor.secrets()
    monkeypatch.setenv("SOONG_T_PLAIN", "plainvalue2")
    assert redactor.secrets()[0] == "plainvalue2"  # longest first


def test_a_renamed_variable_is_seen_once_the_names_are_listed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"SOONG_T_PLAIN": "plainvalue", "SOONG_T_OTHER": "x"}
    redactor = Redactor(environ=env)
    assert redactor.secrets() == ()
    del env["SOONG_T_OTHER"]
    env["SOONG_T_API_TOKEN"] = "pattern-secret-1"  # the same number of variables
    monkeypatch.setattr(redaction, "NAMES_REFRESH_S", 0.0)  # the refresh interval has passed
    assert redactor.secrets() == ("pattern-secret-1",)


def test_secrets_of_an_explicit_mapping() -> None:
    env = {"SOONG_T_NAMED": "abcd1234"}
    redactor = Redactor(["SOONG_T_NAMED"], environ=env)
    assert redactor.secrets() == ("abcd1234",)
    env["SOONG_T_NAMED"] = "efgh5678"
    assert redactor.secrets() == ("efgh5678",)


def test_json_text_columns_are_redacted_however_a_secret_is_escaped() -> None:
    secret = "sk-test/0123456789"
    env = {"SOONG_T_NAMED": secret}
    redactor = Redactor(["SOONG_T_NAMED"], environ=env)
    secrets = redactor.secrets()
    plain = '{"note":"x"}'
    assert redact_json_text(plain, secrets, redactor) is plain  # nothing to redact: kept as is
    escaped = "".join(f"\\u{ord(c):04x}" for c in secret)
    for text in (
        f'{{"note":"{secret}"}}',
        f'{{"note":"{escaped}"}}',
        '{"note":"' + secret[:2] + "\\u" + f"{ord(secret[2]):04x}" + secret[3:] + '"}',
        '{"note":"' + secret.replace("/", "\\/") + '"}',  # JSON may escape a slash
        f'{{"{secret}":1}}',
        f"not json {secret}",
    ):
        out = redact_json_text(text, secrets, redactor)
        assert out is not None and secret not in out and escaped not in out, text
        assert "[REDACTED]" in out
