"""A re-entered run that makes another request at a place its killed run had used: found by the
kill matrix (tests/kill_matrix.py, seed 31, scenario 76). Two sub-agents ran at once and took
their ops' labels in the other order on the re-entry, so one's ``book(11)`` came to the label
where the killed run's other sub-agent had made ``book(17)``. As another request at that place
it ran as the place's next attempt, and so with the same idempotency key (session, run, label,
tool): the payment server took it for the first booking sent again and answered with it. The
tool returned ``booked 11``; nothing was booked. Such a call now runs under a label of its own
(docs/journal.md, Idempotency keys)."""

from __future__ import annotations

import json
from pathlib import Path

import agenttrace

from .conftest import Traced


def test_another_request_at_a_used_place_gets_a_key_of_its_own(
    traced: Traced, tmp_path: Path
) -> None:
    keys: dict[int, str | None] = {}
    amount = [17]

    @agenttrace.tool(effect="idempotent")
    def book(amount: int) -> str:
        keys[amount] = agenttrace.idempotency_key()
        return f"booked {amount}"

    @agenttrace.agent("Shop")
    def shop() -> str:
        return book(amount[0])

    shop()
    stream = _as_killed(traced, tmp_path / "sessions")
    agenttrace.resume(stream)
    amount[0] = 11  # the re-entered run asks another thing at the same place
    assert shop() == "booked 11"
    assert keys[11] is not None and keys[17] is not None
    assert keys[11] != keys[17], json.dumps(keys)


def test_a_later_reentry_finds_each_request_at_its_own_label(
    traced: Traced, tmp_path: Path
) -> None:
    ran: list[tuple[int, str | None]] = []
    amount = [17]

    @agenttrace.tool(effect="idempotent")
    def book(amount: int) -> str:
        ran.append((amount, agenttrace.idempotency_key()))
        return f"booked {amount}"

    @agenttrace.agent("Shop")
    def shop() -> str:
        return book(amount[0])

    shop()
    stream = _as_killed(traced, tmp_path / "sessions")
    agenttrace.resume(stream)
    amount[0] = 11
    assert shop() == "booked 11"
    stream = _as_killed(traced, tmp_path / "sessions")
    # Both requests are in the journal, each at its own place: a re-entry asking either one is
    # answered from it, and neither body runs again.
    labels = [
        json.loads(line)["step"]
        for line in stream.read_bytes().splitlines()
        if b'"kind": "tool"' in line and b'"state": "intent"' in line
    ]
    assert len(labels) == 2 and labels[1] == labels[0] + "/2", labels
    for asked in (17, 11):
        agenttrace.resume(stream)
        amount[0] = asked
        assert shop() == f"booked {asked}"
        stream = _as_killed(traced, tmp_path / "sessions")
    assert [paid for paid, _ in ran] == [17, 11], ran


def _as_killed(traced: Traced, sessions: Path) -> Path:
    """The session as a kill during its last run leaves it: that run's own done line never
    written, no session file since."""
    traced.handle.force_flush()
    (stream,) = sessions.glob("*.events.jsonl")
    lines = stream.read_bytes().splitlines(keepends=True)
    ran = [line for line in lines if b'"kind": "run"' in line and b'"state": "done"' in line]
    stream.write_bytes(b"".join(line for line in lines if line not in ran))
    for snapshot in sessions.glob("*.json.gz"):
        snapshot.unlink()
    assert ran
    return stream
