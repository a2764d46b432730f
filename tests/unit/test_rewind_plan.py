"""The pure rewind plan (``agent_core._checkpoints.rewind``): which checkpoints a rewind undoes, the state
each path goes back to, conflicts, and the paths left alone (refused, not captured, another session's)."""

from __future__ import annotations

from agent_core._checkpoints.model import MISSING, CheckpointRecord, Entry, FileState, RewindRecord
from agent_core._checkpoints.rewind import plan_rewind, to_undo


def f(sha: str) -> FileState:
    return FileState(kind="file", sha=sha, size=1, mode=0o644)


def record(
    cid: str,
    *entries: Entry,
    kind: str = "files",
    session: str = "sess_a",
    window: tuple[float, float] = (0, 1),
    base: int | None = None,
) -> CheckpointRecord:
    return CheckpointRecord(
        checkpoint_id=cid,
        session_id=session,
        run_id="run_x",
        agent_id="agent_x",
        tool_call_id=f"call_{cid}",
        tool_name="code.write_file" if kind == "files" else "code.run_command",
        kind=kind,  # type: ignore[arg-type]
        base_node_seq=base,
        opened_at=window[0],
        closed_at=window[1],
        entries=list(entries),
    )


def test_to_undo_follows_node_order_and_skips_undone_checkpoints() -> None:
    one, two, crashed = (
        record("c1", window=(0, 1)),
        record("c2", window=(2, 3)),
        record("c3", window=(4, 5), base=7),
    )
    journal = [one, two, crashed, RewindRecord(rewind_id="r", node_id="n", checkpoint_ids=["c2"], at=6)]
    seqs = {"c1": 3, "c2": 6}
    assert [r.checkpoint_id for r in to_undo(journal, 2, seqs)] == ["c1", "c3"]
    assert [r.checkpoint_id for r in to_undo(journal, 7, seqs)] == ["c3"]  # its call was made in node 7
    assert to_undo(journal, 8, seqs) == []


def test_a_chain_goes_back_to_its_first_state() -> None:
    undo = [
        record("c1", Entry(path="/p/a", before=MISSING, after=f("1"))),
        record("c2", Entry(path="/p/a", before=f("1"), after=f("2"))),
    ]
    plan = plan_rewind(undo, lambda path: f("2"))
    assert [(a.path, a.state.kind) for a in plan.actions] == [("/p/a", "missing")]
    assert plan.conflicts == [] and plan.checkpoint_ids == ["c1", "c2"]


def test_conflicts_changed_since_and_broken_chain() -> None:
    undo = [record("c1", Entry(path="/p/a", before=f("0"), after=f("1")))]
    assert plan_rewind(undo, lambda path: f("x")).conflicts[0].reason == "changed since by someone else"
    broken = [
        record("c1", Entry(path="/p/a", before=f("0"), after=f("1"))),
        record("c2", Entry(path="/p/a", before=f("hand"), after=f("2"))),
    ]
    (conflict,) = plan_rewind(broken, lambda path: f("2")).conflicts
    assert conflict.reason.startswith("changed outside this session before code.write_file")


def test_left_alone_refused_uncaptured_and_other_sessions() -> None:
    secret = FileState(kind="file", size=3, mode=0o600, mtime_ns=5, note="sensitive")
    undo = [
        record(
            "c1",
            Entry(path="/p/.env", before=secret, after=f("1")),
            Entry(path="/p/.git/config", before=f("0"), after=f("1")),
            Entry(path="/p/seen", before=MISSING, after=f("1")),
            kind="walk",
            window=(10, 20),
        )
    ]
    other = record(
        "o1", Entry(path="/p/seen", before=MISSING, after=f("1")), session="sess_b", window=(15, 16)
    )
    plan = plan_rewind(
        undo,
        lambda path: f("1"),
        others=[other],
        refuse=lambda path: "protected" if "/.git/" in path else None,
    )
    reasons = {s.path: s.reason for s in plan.skipped}
    assert reasons["/p/.git/config"] == "protected"
    assert "never stored" in reasons["/p/.env"]
    assert "session sess_b" in reasons["/p/seen"]
    assert plan.actions == [] and plan.conflicts == []
    # this session wrote the path itself and the other session's command only saw it: put back
    mine = [record("c2", Entry(path="/p/seen", before=MISSING, after=f("1")), window=(10, 20))]
    seen_elsewhere = record(
        "o2",
        Entry(path="/p/seen", before=MISSING, after=f("1")),
        kind="walk",
        session="sess_b",
        window=(9, 30),
    )
    assert [a.path for a in plan_rewind(mine, lambda path: f("1"), others=[seen_elsewhere]).actions] == [
        "/p/seen"
    ]
    # a checkpoint of another session that did not overlap is no claim
    later = record(
        "o3", Entry(path="/p/seen", before=MISSING, after=f("1")), session="sess_b", window=(40, 41)
    )
    assert [a.path for a in plan_rewind(mine, lambda path: f("1"), others=[later]).actions] == ["/p/seen"]
