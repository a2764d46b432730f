"""Compact persisted form of ``context_built`` reports (issue 16).

A context report lists every included (and excluded) node id (docs/events.md#contextbuildreport), so stored
verbatim the event table grows quadratically with a session. The writer stores such a list as the ranges of
the nodes' ``node_seq`` instead, in place::

    "included_node_ids": {"node_seq_ranges": [[1, 200], [205, 230]]}

(inclusive, in the list's own order: a range is a run of consecutive seqs). Reads expand it back, so a
``ContextBuildReport`` read through the API is unchanged. Rows written before this form (plain lists)
are read as they are. A list is compacted only when every id is a node of the session known to the
writer and none contains a secret value; otherwise it is stored verbatim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.errors import ErrorCode, SchemaError

COMPACT_FIELDS = ("included_node_ids", "excluded_node_ids")
RANGES_KEY = "node_seq_ranges"
MARKER = f'"{RANGES_KEY}"'
"""Substring of a stored payload's JSON text that holds at least one compact list."""
MIN_COMPACT_IDS = 8
"""Shorter lists are stored verbatim (ranges would not pay off)."""


def wants_node_index(payload: Mapping[str, Any]) -> bool:
    """Whether compacting this ``context_built`` payload would need the session's node index."""
    return any(isinstance(v := payload.get(f), list) and len(v) >= MIN_COMPACT_IDS for f in COMPACT_FIELDS)


def seq_ranges(seqs: Sequence[int]) -> list[list[int]]:
    """Runs of consecutive seqs, in order: ``[3, 4, 5, 9, 1]`` → ``[[3, 5], [9, 9], [1, 1]]``."""
    return extend_ranges([], seqs)


def extend_ranges(ranges: list[list[int]], seqs: Sequence[int]) -> list[list[int]]:
    """Appends ``seqs`` to ``ranges`` (in place, see :func:`seq_ranges`) and returns it."""
    for seq in seqs:
        if ranges and seq == ranges[-1][1] + 1:
            ranges[-1][1] = seq
        else:
            ranges.append([seq, seq])
    return ranges


class CompactedList:
    """A node-id list stored compactly before, with the seq ranges of its ids (all committed)."""

    __slots__ = ("ids", "ranges", "secrets")

    def __init__(self, ids: list[str], ranges: list[list[int]], secrets: tuple[str, ...]) -> None:
        self.ids = ids
        self.ranges = ranges
        self.secrets = secrets


class NodeIndex(dict[str, int]):
    """Node id → ``node_seq`` of a session's committed nodes, and the last compacted list of each field.

    A session's next report usually lists the same ids plus a few new ones: only those are looked up
    (per report the writer's work then does not grow with the session).
    """

    __slots__ = ("lists", "upto")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.lists: dict[str, CompactedList] = {}
        self.upto = max(self.values(), default=0)
        """The session's ``node_seq`` counter this index is complete up to (another process's nodes
        above it are missing: the index is dropped when the stored counter is found elsewhere)."""


class CompactIds:
    """The seqs of one list: the ranges of a known prefix, then the seqs of the rest (placeholders
    ``-(k + 1)`` for nodes of the same write, see :meth:`ranges`)."""

    __slots__ = ("prefix", "seqs")

    def __init__(self, prefix: list[list[int]], seqs: list[int]) -> None:
        self.prefix = prefix
        self.seqs = seqs

    def ranges(self, first_new_seq: int) -> list[list[int]]:
        """The list's ranges; a placeholder ``-(k + 1)`` is ``first_new_seq + k`` (the seq the writer
        gave the k-th new node)."""
        seqs = [s if s > 0 else first_new_seq - 1 - s for s in self.seqs]
        return extend_ranges([list(r) for r in self.prefix], seqs)


def compact_seqs(
    payload: Mapping[str, Any],
    node_seqs: Mapping[str, int],
    new_nodes: Mapping[str, int],
    secrets: tuple[str, ...],
) -> dict[str, CompactIds] | None:
    """The seqs of each long node-id list of ``payload`` that can be stored compactly (``None``: none).

    ``node_seqs`` maps committed node ids to their seq; ``new_nodes`` maps the ids of nodes written in
    the same transaction to ``-(k + 1)`` (k-th node of that write; its seq is known only to the writer,
    see :meth:`CompactIds.ranges`). A list is skipped when an id is unknown or not a string, or holds a
    secret. With a :class:`NodeIndex`, a list that extends the field's previous list reuses its ranges.
    """
    out: dict[str, CompactIds] | None = None
    memo = node_seqs.lists if isinstance(node_seqs, NodeIndex) else None
    for field in COMPACT_FIELDS:
        ids = payload.get(field)
        if not isinstance(ids, list) or len(ids) < MIN_COMPACT_IDS:
            continue
        known = memo.get(field) if memo is not None else None
        start, prefix = 0, []
        # the ids are mostly the same string objects as before: the comparison is a C loop
        if known is not None and known.secrets == secrets and ids[: len(known.ids)] == known.ids:
            start, prefix = len(known.ids), known.ranges
        rest = ids[start:] if start else ids
        seqs = [(node_seqs.get(i) or new_nodes.get(i)) if type(i) is str else None for i in rest]
        if None in seqs:
            continue
        if secrets and rest:  # a secret never holds NUL: one inside the joined ids lies within one id
            joined = "\0".join(rest)
            if any(s in joined for s in secrets):
                continue
        if out is None:
            out = {}
        found = CompactIds(prefix, seqs)  # type: ignore[arg-type]
        out[field] = found
        if memo is not None and all(s > 0 for s in seqs):  # type: ignore[operator]
            memo[field] = CompactedList(list(ids), found.ranges(0), secrets)
    return out


def compact_payload(payload: Mapping[str, Any], ranges: Mapping[str, list[list[int]]]) -> dict[str, Any]:
    """A copy of ``payload`` (key order kept) with each field of ``ranges`` in its compact form."""
    out = dict(payload)
    for field, value in ranges.items():
        out[field] = {RANGES_KEY: value}
    return out


def _bad(message: str) -> SchemaError:
    return SchemaError(ErrorCode.schema_error, f"cannot convert event record: {message}")


def expand_report(
    payload: dict[str, Any], ids_by_seq: Sequence[str | None], *, complete: bool = False
) -> None:
    """Replaces compact lists in ``payload`` (in place) by the node ids; a range naming a seq with no
    node → ``schema_error``. ``ids_by_seq[seq]`` is the node id of ``seq`` (``None``: no such node);
    ``complete``: the caller checked that ``ids_by_seq[1:]`` has no ``None``."""
    for field in COMPACT_FIELDS:
        value = payload.get(field)
        if not isinstance(value, dict):
            continue
        ranges = value.get(RANGES_KEY)
        if len(value) != 1 or not isinstance(ranges, list):
            raise _bad(f"invalid compact {field}")
        ids: list[str | None] = []
        top = len(ids_by_seq)
        for item in ranges:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or type(item[0]) is not int
                or type(item[1]) is not int
                or not 1 <= item[0] <= item[1] < top
            ):
                raise _bad(f"invalid node_seq range {item!r} in {field}")
            ids += ids_by_seq[item[0] : item[1] + 1]
        if not complete and None in ids:
            raise _bad(f"{field} names a node_seq with no node")
        payload[field] = ids


def ids_by_seq(rows: Sequence[Sequence[Any]]) -> list[str | None]:
    """``(node_seq, node_id)`` rows → a list indexed by ``node_seq`` (holes are ``None``)."""
    top = max((int(r[0]) for r in rows), default=0)
    out: list[str | None] = [None] * (top + 1)
    for seq, node_id in rows:
        out[seq] = node_id
    return out
