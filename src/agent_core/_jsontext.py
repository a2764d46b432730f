"""Compact JSON text, the one way the package writes JSON for storage, hashing, prompts and token counts.

Compact separators (``,`` and ``:`` without spaces) and UTF-8 text (``ensure_ascii=False``). By default a
value JSON cannot represent is written as its ``str()``; ``strict=True`` raises instead (``TypeError`` for
such a value, ``ValueError`` for NaN or infinity), which storage columns use. Depends only on the standard
library, so every layer may import it.
"""

from __future__ import annotations

import json
from typing import Any

_ENCODERS = {
    (strict, sort_keys): json.JSONEncoder(
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=sort_keys,
        allow_nan=not strict,
        default=None if strict else str,
    )
    for strict in (False, True)
    for sort_keys in (False, True)
}
"""Encoders built once (``json.dumps`` with non-default options builds a new encoder per call)."""


def compact_json(value: Any, *, strict: bool = False, sort_keys: bool = False) -> str:
    """``value`` as compact UTF-8 JSON text (see the module docstring for ``strict``)."""
    return _ENCODERS[strict, sort_keys].encode(value)
