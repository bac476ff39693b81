"""A re-entered run that makes another request at a place its killed run had used: found by the
kill matrix (tests/kill_matrix.py, seed 31, scenario 76). Two sub-agents ran at once and took
their ops' labels in the other order on the re-entry, so one's ``book(11)`` came to the label
where the killed run's other sub-agent had made ``book(17)``. As another request at that place
it runs, as the place's next attempt, and so with the same idempotency key (session, run,
label, tool): the payment server took it for the first booking sent again and answered with it.
The tool returned ``booked 11``; nothing was booked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agenttrace

from .conftest import Traced


@pytest.mark.xfail(
    strict=True,
    reason="an idempotency key names the place, not the request: another request at a place "
    "the killed run used gets that call's key (docs/journal.md, Idempotency keys)",
)
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
    traced.handle.force_flush()
    sessions = tmp_path / "sessions"
    (stream,) = sessions.glob("*.events.jsonl")
    # The run as a kill leaves it: its own done line never written, no session file since.
    lines = stream.read_bytes().splitlines(keepends=True)
    ran = [line for line in lines if b'"kind": "run"' in line and b'"state": "done"' in line]
    stream.write_bytes(b"".join(line for line in lines if line not in ran))
    for snapshot in sessions.glob("*.json.gz"):
        snapshot.unlink()
    assert len(ran) == 1
    agenttrace.resume(stream)
    amount[0] = 11  # the re-entered run asks another thing at the same place
    assert shop() == "booked 11"
    assert keys[11] is not None and keys[17] is not None
    assert keys[11] != keys[17], json.dumps(keys)
