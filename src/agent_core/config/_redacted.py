"""The resolved configuration as JSON a person may look at: every secret masked.

:func:`redacted_config` is what ``soong-agent serve`` shows in its settings panel (``GET /api/config``). The
configuration names its secrets by environment variable (``api_key_env``, ``storage.postgres.dsn_env``);
those names stay visible (with whether the variable is set), their values never appear. Besides that:

* a string under a key that looks sensitive (``api_key``, ``token``, ``secret``, ``password``,
  ``authorization``, ``cookie``, ``credential``) is replaced by ``[REDACTED]`` (numbers such as
  ``reserve_output_tokens`` stay);
* the password of a URL (``scheme://user:password@host``) is replaced;
* every value of a variable the configuration names, of a variable named like a secret (``*KEY*``,
  ``*TOKEN*``, ...; 8 characters or more), the password inside the configured DSN and every secret the
  process registered (the serve token) is replaced wherever it occurs in a string.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from agent_core._redaction import REDACTED, SENSITIVE_KEY, Redactor, dsn_secrets
from agent_core.config.loader import LoadedConfig

_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]*:)([^@\s/]+)@")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_names(value: Any, where: str, found: dict[str, str]) -> None:
    """Collects ``<key ending in _env>: <variable name>`` pairs (dotted key path -> name)."""
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if str(key).endswith("_env") and isinstance(item, str) and _ENV_NAME.match(item):
                found.setdefault(path, item)
            else:
                _env_names(item, path, found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _env_names(item, f"{where}[{index}]", found)


def _masked(value: Any, key: str, redactor: Redactor) -> Any:
    if isinstance(value, dict):
        return {k: _masked(v, str(k), redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, key, redactor) for v in value]
    if not isinstance(value, str):
        return value
    if key.endswith("_env") and _ENV_NAME.match(value):
        return value  # the name of a variable, not its value
    if value and SENSITIVE_KEY.search(key):
        return REDACTED
    return redactor.text(_URL_PASSWORD.sub(rf"\1{REDACTED}@", value))


def redacted_config(config: LoadedConfig, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{"home", "project", "config_path", "session_db_path", "settings", "environment", "redacted"}``:
    the locations the configuration was resolved against, the validated settings (defaults filled, paths
    expanded) with every secret masked, and the variables it names (``{"key", "name", "set"}``)."""
    env = os.environ if environ is None else environ
    settings = config.settings.model_dump(mode="json")
    names: dict[str, str] = {}
    _env_names(settings, "", names)
    redactor = Redactor(names.values(), environ=env)
    for name in names.values():
        value = env.get(name)
        for secret in dsn_secrets(value) if value else []:
            redactor.add_secret(secret)
    return {
        "home": redactor.text(str(config.home)),
        "project": redactor.text(str(config.project)),
        "config_path": redactor.text(str(config.config_path)),
        "session_db_path": redactor.text(str(config.session_db_path)),
        "settings": _masked(settings, "", redactor),
        "environment": [
            {"key": key, "name": name, "set": bool(env.get(name))} for key, name in names.items()
        ],
        "redacted": True,
    }
