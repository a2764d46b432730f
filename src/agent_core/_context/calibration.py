"""Per-model correction of the core token estimate (issue 34 item 5).

The core estimate (a quarter of the characters) is wrong for every tokenizer the SDK does not ship. Each
completed model call reports the real prompt size (``Usage.input_tokens``, the whole prompt): the ratio
to the composer's estimate of that prompt is averaged per ``(provider, model)`` (an exponential moving
average, half weight to the newest), and the composer divides the model's limits by it
(``_context/prompt.py``), so the next estimate is measured against the window the model really has.

Rules: a ratio outside ``[MIN_FACTOR, MAX_FACTOR]`` is not learned from usage (a server reporting
made-up or partial counts); prompts under ``MIN_ESTIMATE`` tokens are too small to say anything. A
provider's "prompt too long" answer with its figures is stronger evidence: :meth:`overflowed` raises
the factor to at least that ratio (plus a margin) at once.
"""

from __future__ import annotations

import threading

MIN_FACTOR = 0.5
MAX_FACTOR = 4.0
MIN_ESTIMATE = 256
OVERFLOW_MARGIN = 1.05
"""After an overflow the factor overshoots the reported ratio a little: the retry must fit."""


class TokenCalibration:
    """Learned real-tokens-per-estimated-token factors by ``(provider, model)`` (thread-safe)."""

    def __init__(self) -> None:
        self._factors: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def factor(self, provider: str, model: str) -> float:
        return self._factors.get((provider, model), 1.0)

    def observe(self, provider: str, model: str, estimated: int, reported: int) -> float | None:
        """Learns from a completed call's reported prompt size; the new factor, or ``None`` (ignored)."""
        if estimated < MIN_ESTIMATE or reported <= 0:
            return None
        ratio = reported / estimated
        if not MIN_FACTOR <= ratio <= MAX_FACTOR:
            return None
        key = (provider, model)
        with self._lock:
            old = self._factors.get(key)
            new = ratio if old is None else (old + ratio) / 2
            self._factors[key] = round(new, 4)
            return self._factors[key]

    def overflowed(self, provider: str, model: str, estimated: int, reported: int | None) -> float:
        """Learns from a "prompt too long" answer that reported the prompt size; the factor after it."""
        key = (provider, model)
        with self._lock:
            current = self._factors.get(key, 1.0)
            if reported is not None and estimated > 0:
                wanted = min(MAX_FACTOR, max(MIN_FACTOR, reported / estimated * OVERFLOW_MARGIN))
                current = max(current, round(wanted, 4))
                self._factors[key] = current
            return current
