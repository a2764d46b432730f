"""Identity memo: facts or encodings computed once per (immutable) object, kept while the object lives.

The provider-neutral messages of an active path are rendered once per node and kept (``context/render.py``),
so the same :class:`~agent_core.types.model.ModelMessage` and content-block objects reach an adapter turn
after turn. Anything derived from such an object (its wire encoding, its validation, its tool names) is
kept in a :class:`WireMemo` keyed by object identity, so a request over a long session costs a dict lookup
per message instead of recomputing.

Contracts:

- An entry lives exactly as long as its key object (a weak-reference callback drops it), so a recycled
  ``id()`` never returns a stale value and the memo never keeps a message alive.
- Keyed objects are treated as immutable once encoded (nodes never change; the composer replaces, never
  edits, a message it trims). Cached values are shared between requests and must never be mutated.
- Objects that cannot be weakly referenced are simply not cached.
"""

from __future__ import annotations

import weakref
from typing import Any


class _KeyedRef(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that remembers its memo key (no closure per entry: long sessions hold many)."""

    __slots__ = ("key",)
    key: int


class WireMemo:
    """``object -> encoding`` by identity, with entries dropped when the object dies.

    ``capacity``: at most this many entries, the oldest dropped first (for a memo whose owner keeps what
    it needs for long anyway, e.g. an encoded history)."""

    __slots__ = ("__weakref__", "_capacity", "_drop", "_entries")

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = capacity
        self._entries: dict[int, tuple[_KeyedRef, Any]] = {}
        memo = weakref.ref(self)

        def drop(ref: _KeyedRef) -> None:
            owner = memo()
            if owner is not None:
                current = owner._entries.get(ref.key)
                if current is not None and current[0] is ref:
                    del owner._entries[ref.key]

        self._drop = drop

    def get(self, obj: object) -> Any | None:
        """The encoding stored for this very object, or ``None``."""
        entry = self._entries.get(id(obj))
        if entry is not None and entry[0]() is obj:
            return entry[1]
        return None

    def put(self, obj: object, value: Any) -> None:
        try:
            ref = _KeyedRef(obj, self._drop)
        except TypeError:
            return
        ref.key = key = id(obj)
        entries = self._entries
        entries[key] = (ref, value)
        if self._capacity is not None and len(entries) > self._capacity:
            del entries[next(iter(entries))]

    def __len__(self) -> int:
        return len(self._entries)
