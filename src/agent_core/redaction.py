"""Keeping secrets out of what the SDK writes: the process's redactor, for code that prints or logs.

The runtime replaces the values of secret environment variables (every ``api_key_env`` variable, and
variables named like ``*KEY*``, ``*TOKEN*``, ``*SECRET*`` ... with 8 characters or more) in tool output, model
requests, storage, events and logs. :func:`register_secret` adds a value the process holds (a server token,
a password read from a file); :func:`redact_text` applies the same replacement to any text (a log line).
"""

from __future__ import annotations

from agent_core._redaction import REDACTED, register_secret

__all__ = ["REDACTED", "redact_text", "register_secret"]


def redact_text(text: str) -> str:
    """``text`` with every known secret value replaced by :data:`REDACTED`."""
    from agent_core._redaction import default_redactor

    return default_redactor.text(text)
