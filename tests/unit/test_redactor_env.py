"""Redactor.secrets() re-reads os.environ on every call: a changed, removed or added value is seen."""

from __future__ import annotations

import pytest

from agent_core._redaction import Redactor


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


def test_secrets_of_an_explicit_mapping() -> None:
    env = {"SOONG_T_NAMED": "abcd1234"}
    redactor = Redactor(["SOONG_T_NAMED"], environ=env)
    assert redactor.secrets() == ("abcd1234",)
    env["SOONG_T_NAMED"] = "efgh5678"
    assert redactor.secrets() == ("efgh5678",)
