"""Live text deltas: secret-safe forwarding and debug-mode aggregation
(docs/events.md#ordering-and-persistence, docs/storage.md#redaction).

A secret can arrive split across several provider deltas, where per-delta redaction cannot see it (and
the event channel may later coalesce the pieces). :class:`DeltaRedactor` therefore holds back the
shortest tail of the stream that could still be the beginning of a secret value and releases it once the
next delta proves otherwise (or the stream ends): forwarded text never contains a secret. The
concatenation of everything forwarded equals the redacted full text.

:class:`DeltaAggregator` collects the forwarded text of one model call for debug mode, where it is
persisted as ``model_text_delta`` events of at most :data:`AGGREGATE_CHUNK` characters each, flushed at
model completion — never one row per token.
"""

from __future__ import annotations

from agent_core._redaction import Redactor

AGGREGATE_CHUNK = 4096
"""Maximum characters of one persisted (debug-mode) ``model_text_delta`` event."""


class DeltaRedactor:
    """Redacts a text stream delivered in pieces; ``feed`` returns the part that is safe to forward."""

    __slots__ = ("_held", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""

    def feed(self, text: str) -> str:
        secrets = self._redactor.secrets()
        if not secrets:
            out, self._held = self._held + text, ""
            return out
        buffer = self._redactor.text(self._held + text)
        keep = _secret_prefix_tail(buffer, secrets)
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """Everything still held back (the stream ended, so it cannot complete a secret any more)."""
        out, self._held = self._redactor.text(self._held), ""
        return out


def _secret_prefix_tail(text: str, secrets: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of some secret (0 if none)."""
    longest = min(len(text), max(len(s) for s in secrets) - 1)
    for size in range(longest, 0, -1):
        tail = text[-size:]
        if any(len(s) > size and s.startswith(tail) for s in secrets):
            return size
    return 0


class DeltaAggregator:
    """The forwarded text of one model call, cut into persisted chunks of ``AGGREGATE_CHUNK`` characters."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[str] = []

    def add(self, text: str) -> None:
        if text:
            self._parts.append(text)

    def drain(self) -> list[str]:
        text = "".join(self._parts)
        self._parts = []
        return [text[i : i + AGGREGATE_CHUNK] for i in range(0, len(text), AGGREGATE_CHUNK)]
