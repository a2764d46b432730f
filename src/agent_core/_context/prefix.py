"""The stable-prefix rule: what may change the prompt prefix, and when (issue 33).

A provider's prompt cache (OpenAI's automatic prefix caching, Anthropic's ``cache_control`` breakpoints,
llama.cpp's and vLLM's prefix reuse) reuses only the part of a request that repeats an earlier request
verbatim from its start: tools, then the system prompt, then the messages. So an agent's requests are
kept **append-only between two context rebuilds** (an *epoch*):

* The tool definitions and the static system blocks change only when their content does (another tool
  set, an edited prompt asset, a new instruction file in the catalog). Nothing per run or per turn is in
  them: ``runtime.role`` names role, mode and agent; ``runtime_state`` (dynamic) names project, mode, role,
  session and agent, and the date (one change a day) — never the run id.
* The dynamic blocks (agent definition, loaded instructions, skill catalog, memory catalog, runtime
  state) enter the system prompt as they are when an epoch starts, and stay so for the epoch.
* When a dynamic block appears, changes or goes away during an epoch (an instruction file read for the
  first time or edited, ``MEMORY.md`` rewritten by memory extraction, a new skill, the next day), the
  model gets the new content in a *tail note* appended after the conversation at that point:
  ``<system_update block="<block_id>">…</system_update>`` (the core prompt says the latest update of a
  block replaces it). The note then keeps its place, so later requests still repeat the earlier ones.
* The task board (orchestrator and worker runs) changes often: it is a ``<task_board>`` tail note each
  time its text changes, so an unchanged board costs nothing. A tail note is a synthetic ``user``
  message (``synthetic``, ``source``) like the other runtime messages.
* A new epoch starts when the context is rebuilt: a compaction (its summary replaces the history), a
  build that had to trim or degrade the conversation to fit, or a path that no longer holds a note's
  place (a rewind). Then every block, the task board included, is rendered into the system prompt as it
  is now and the notes are dropped. A new cursor for the agent (another process) starts an epoch too,
  with the board in a note. These are the only points where the prefix may break; ``prompt_cache_break``
  events (debug) name any other break.
* A sub-agent or fork with its default tools, on its parent's model, starts where its parent's last
  request left off (:meth:`PrefixState.inherit`): the same tool definitions and system prompt (a fork:
  and conversation), then its delegated task, then its own role, tool catalog, agent definition and
  runtime state as ``<system_update>`` notes; a later rebuild gives it its own prompt.

The model therefore sees every dynamic block in the turn it applies to: in the system prompt, or in the
latest note for the block. :func:`settle` applies the rule for one build; :class:`PrefixState` is what an
agent keeps between builds (on its cursor, across its runs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from html import escape

from agent_core._context.tokens import TokenCounter
from agent_core._notes import escape_note_text
from agent_core.types.content import TextBlock
from agent_core.types.model import ModelMessage, SystemBlock

TASK_BOARD_KEY = "task_board"
"""The task board's key among the blocks (and its ``block_id`` when folded into the system prompt)."""
TASK_BOARD_PRIORITY = 150
NO_ACTIVE_TASKS = "no active Tasks"


_UPDATE_TAG = re.compile(r"<(?=\s*/?\s*system_update\b)", re.IGNORECASE)


def board_text(board: str | None) -> str:
    """The board wrapped in its tag; Task titles and summaries (model-written) cannot close it."""
    return f"<task_board>{escape_note_text(board) if board else NO_ACTIVE_TASKS}</task_board>"


def update_text(key: str, content: str | None) -> str:
    """A block's ``<system_update>`` note. The block keeps its own tags (as in the system prompt); only
    this note's tag is escaped in it, so file or memory text cannot end the update and start another."""
    attribute = escape(key, quote=True)
    if content is None:
        return f'<system_update block="{attribute}" removed="true"></system_update>'
    body = _UPDATE_TAG.sub("&lt;", content)
    return f'<system_update block="{attribute}">\n{body}\n</system_update>'


def board_block(board: str, counter: TokenCounter) -> SystemBlock:
    text = board_text(board)
    return SystemBlock(
        block_id=TASK_BOARD_KEY,
        source=TASK_BOARD_KEY,
        content=text,
        priority=TASK_BOARD_PRIORITY,
        dynamic=True,
        token_count=counter.text(text),
    )


@dataclass(eq=False, kw_only=True, slots=True)
class TailNote:
    """A block's new content (``None``: the block went away), appended after the conversation at
    ``anchor`` (the node id of the message it follows; ``None``: before the first message)."""

    key: str
    content: str | None
    anchor: str | None
    message: ModelMessage
    tokens: int
    position: int = -1
    """Last known index of ``anchor`` among the included node ids."""


class PrefixState:
    """One agent's prompt prefix in the current epoch (see the module docstring)."""

    __slots__ = ("epoch", "inherited", "notes", "shown", "started", "system")

    def __init__(self) -> None:
        self.inherited = False
        """The agent's requests start with its parent's prompt (a child; see :meth:`inherit`)."""
        self.started = False
        self.epoch: str | None = None
        """The compaction node id the epoch was built on."""
        self.system: list[SystemBlock] = []
        """The dynamic blocks in the system prompt during the epoch, in prompt order."""
        self.shown: dict[str, str | None] = {}
        """Block key → the content the model last received for it (``None``: told it went away)."""
        self.notes: list[TailNote] = []

    def inherit(self, parent: PrefixState, sent: Sequence[SystemBlock], *, conversation: bool) -> None:
        """Starts this (fresh) state where ``parent``'s last request left off: a child sends its parent's
        tools and system prompt (``sent``, the parent's last system blocks) — a fork also the parent's
        conversation (``conversation``) — and gets what differs for itself (its role, tools, agent
        definition, runtime state) as tail notes after them."""
        self.inherited = True
        self.started = True
        self.epoch = parent.epoch if conversation else None
        self.system = []
        self.shown = {b.block_id: b.content for b in sent}
        self.notes = []
        if conversation:
            self.shown.update(parent.shown)
            self.notes = [replace(note) for note in parent.notes]


@dataclass(kw_only=True, slots=True)
class Settled:
    """One build's dynamic system blocks and tail notes (see :func:`settle`)."""

    system: list[SystemBlock]
    notes: list[TailNote]
    new_notes: list[TailNote] = field(default_factory=list)
    """Notes made by this build (also in ``notes``)."""
    restart: bool = False
    """The build starts a new epoch: ``system`` holds the current blocks."""
    epoch: str | None = None
    cause: str | None = None
    """Why the epoch restarts: ``fresh`` (a new state), ``compaction``, ``rebuild`` (trimmed or degraded),
    ``rewind`` (the path lost a note's place)."""

    @property
    def system_tokens(self) -> int:
        return sum(b.token_count or 0 for b in self.system)

    @property
    def note_tokens(self) -> int:
        return sum(n.tokens for n in self.notes)


def settle(
    state: PrefixState,
    *,
    epoch: str | None,
    blocks: Sequence[SystemBlock],
    board: SystemBlock | None,
    included: Sequence[str],
    counter: TokenCounter,
    rebuild: bool = False,
    noted: Sequence[SystemBlock] = (),
) -> Settled:
    """Applies the rule to one build without changing ``state`` (:func:`commit` records it).

    ``epoch``: the compaction node id of the conversation; ``blocks``: the dynamic blocks selected now
    (prompt order); ``board``: the task board block, if one is shown; ``included``: the node ids of the
    conversation's messages; ``rebuild``: the conversation was trimmed or degraded for this build. A fresh
    state puts ``blocks`` in the system prompt and the board in a note; a rebuild puts both in the system
    prompt. ``noted``: blocks sent in the system prompt of an agent's own requests that an inheriting
    agent's requests do not carry (they are compared like dynamic blocks, and noted when they differ).
    """
    cause = _restart_cause(state, epoch, included, rebuild)
    if cause is not None:
        fold = state.started or rebuild
        system = list(blocks) if board is None or not fold else [*blocks, board]
        settled = Settled(system=system, notes=[], restart=True, epoch=epoch, cause=cause)
        if board is not None and not fold:
            settled.new_notes = [_make(TASK_BOARD_KEY, board.content, included, counter)]
            settled.notes = list(settled.new_notes)
        return settled
    current: dict[str, str] = {b.block_id: b.content for b in [*noted, *blocks]}
    if board is not None:
        current[TASK_BOARD_KEY] = board.content
    new = [_make(k, c, included, counter) for k, c in current.items() if state.shown.get(k) != c]
    new += [
        _make(key, None, included, counter)
        for key, shown in state.shown.items()
        if key not in current and shown is not None
    ]
    return Settled(system=list(state.system), notes=[*state.notes, *new], new_notes=new, epoch=epoch)


def _restart_cause(
    state: PrefixState, epoch: str | None, included: Sequence[str], rebuild: bool
) -> str | None:
    """Why a build starts a new epoch (``None``: it continues the current one)."""
    if not state.started:
        return "fresh"
    if state.epoch != epoch:
        return "compaction"
    if rebuild:
        return "rebuild"
    if any(_locate(note, included) == GONE for note in state.notes):
        return "rewind"
    return None


def commit(state: PrefixState, settled: Settled) -> None:
    """Records a build: its epoch, its system blocks and the notes it made."""
    if settled.restart:
        state.started = True
        state.epoch = settled.epoch
        state.system = list(settled.system)
        state.shown = {b.block_id: b.content for b in settled.system}
        state.notes = []
    for note in settled.new_notes:
        state.notes.append(note)
        state.shown[note.key] = note.content


def _note_message(key: str, content: str | None) -> ModelMessage:
    if key == TASK_BOARD_KEY:
        return ModelMessage(
            role="user",
            content=[TextBlock(text=content if content is not None else board_text(None))],
            metadata={"synthetic": True, "source": "task_board"},
        )
    return ModelMessage(
        role="user",
        content=[TextBlock(text=update_text(key, content))],
        metadata={"synthetic": True, "source": "system_update", "block_id": key},
    )


def _make(key: str, content: str | None, included: Sequence[str], counter: TokenCounter) -> TailNote:
    message = _note_message(key, content)
    return TailNote(
        key=key,
        content=content,
        anchor=included[-1] if included else None,
        message=message,
        tokens=counter.message(message.content),
        position=len(included) - 1,
    )


GONE = -2


def _locate(note: TailNote, included: Sequence[str]) -> int:
    """Index of the note's anchor in ``included`` (``-1``: before the first message; :data:`GONE`)."""
    if note.anchor is None:
        return -1
    position = note.position
    if 0 <= position < len(included) and included[position] == note.anchor:
        return position
    try:
        position = included.index(note.anchor)
    except ValueError:
        return GONE
    note.position = position
    return position


def place(
    messages: list[ModelMessage], included: Sequence[str], notes: Sequence[TailNote]
) -> list[ModelMessage]:
    """``messages`` (one per included node id) with every note after its anchor, in note order."""
    if not notes:
        return messages
    out: list[ModelMessage] = []
    start = 0
    for note in notes:
        end = _locate(note, included) + 1
        if end > start:
            out.extend(messages[start:end])
            start = end
        out.append(note.message)
    out.extend(messages[start:])
    return out
