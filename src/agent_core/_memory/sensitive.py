"""Forbidden-content detection for memory writes (docs/context.md#extraction).

The Memory Writer rejects (never silently redacts) content that matches the shared secret patterns:
private key blocks, known token formats, ``password=``/``secret=``-style assignments, and the values of
secret environment variables known to the :class:`~agent_core._redaction.Redactor` (every variable named
by an ``*_env`` config key plus secret-looking variable names). :func:`find_secret` returns only a label
for the kind of match, never the matched text, so callers can put it into errors and events safely.
"""

from __future__ import annotations

import re

from agent_core._redaction import REDACTED, Redactor

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key block", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("openai-style api key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}")),
    ("github token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("aws access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("google api key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("json web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{20,}")),
    (
        "credential assignment",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|secret|client_secret|api[_-]?key|access[_-]?token|auth[_-]?token"
            r"|private[_-]?key)\s*=\s*['\"]?[^\s'\"]{3,}"
        ),
    ),
    ("url credentials", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]{3,}@")),
)


def find_secret(text: str, redactor: Redactor) -> str | None:
    """A label naming the first kind of secret found in ``text``, or ``None`` when it looks clean."""
    if redactor.contains_secret(text):
        return "value of a secret environment variable"
    for label, pattern in SECRET_PATTERNS:
        if pattern.search(text):
            return label
    return None


def mask_secrets(text: str, redactor: Redactor) -> str:
    """``text`` with secret env values and every secret-pattern match replaced by ``[REDACTED]``."""
    masked = redactor.text(text)
    for _label, pattern in SECRET_PATTERNS:
        masked = pattern.sub(REDACTED, masked)
    return masked
