"""The resolved configuration shown by ``serve`` (issue 39 item 5): every secret masked, names kept."""

from __future__ import annotations

import json
from pathlib import Path

from agent_core.config import load_config
from agent_core.config._redacted import redacted_config


def test_secrets_are_masked_wherever_they_occur_and_variable_names_stay(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (home / "config.toml").write_text(
        """
[model]
provider = "openai"
name = "m"
api_key_env = "MY_LLM"
base_url = "https://user:url-password-1@llm.invalid/v1?key=sk-value-0123456789"

[model_overrides.alt]
base_url = "https://llm.invalid/v1?dsn_password=pg-password-42"

[storage]
backend = "postgres"

[storage.postgres]
dsn_env = "MY_DSN"
""",
        encoding="utf-8",
    )
    environ = {"MY_LLM": "sk-value-0123456789", "MY_DSN": "postgresql://app:pg-password-42@db/app"}
    config = load_config(home_dir=home, project_dir=project)
    view = redacted_config(config, environ=environ)
    text = json.dumps(view)
    for secret in ("url-password-1", "sk-value-0123456789", "pg-password-42"):
        assert secret not in text, secret
    model = view["settings"]["model"]
    assert model["base_url"] == "https://user:[REDACTED]@llm.invalid/v1?key=[REDACTED]"
    assert model["api_key_env"] == "MY_LLM"
    assert view["settings"]["storage"]["postgres"]["dsn_env"] == "MY_DSN"
    assert {"key": "model.api_key_env", "name": "MY_LLM", "set": True} in view["environment"]
    assert {"key": "storage.postgres.dsn_env", "name": "MY_DSN", "set": True} in view["environment"]
    assert view["settings"]["context"]["reserve_output_tokens"] == 4096  # counts are not secrets
    assert view["redacted"] is True


def test_unset_variables_are_reported_unset(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[model]\nprovider = "openai"\nname = "m"\napi_key_env = "NOT_SET_ANYWHERE"\n', encoding="utf-8"
    )
    config = load_config(home_dir=tmp_path, project_dir=tmp_path)
    view = redacted_config(config, environ={})
    assert view["environment"] == [{"key": "model.api_key_env", "name": "NOT_SET_ANYWHERE", "set": False}]
