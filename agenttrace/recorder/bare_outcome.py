"""The outcome of an op whose ``Ended`` record carries none: a record made by hand, not by a
scope (a scope gives every op's record its outcome: ``accounted.op``, or ``outcome`` for an op
answered from the journal). Only the op's identity is read from its span's attributes; what it
used and cost is not known, so it is left out, never decoded from attribute names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agenttrace import semconv as sc
from agenttrace.model.outcome import OpOutcome, OutcomeBuilder


def bare_outcome(
    started: Mapping[str, Any],
    started_ns: int,
    ended_ns: int,
    error: str | None,
    call_path: str | None = None,
) -> OpOutcome:
    """An outcome with the identity ``started`` (the span's start attributes) gives, how the op
    ended, and nothing it used or cost."""
    get: Callable[..., Any] = started.get  # values as the span has them (a hand-made record's
    # may lack any of them: ``None`` then, as the ledger's reader takes)
    name = get(sc.GEN_AI_TOOL_NAME) or get(sc.GEN_AI_REQUEST_MODEL) or ""
    return OutcomeBuilder().outcome(
        started.get(sc.KIND),
        str(name),
        str(started.get(sc.PATH, "")),
        started_ns,
        ended_ns,
        error,
        origin_txn_id=get(sc.TXN_ORIGIN),
        txn_id=get(sc.TXN_ID),
        agent_id=get(sc.AGENT_ID),
        parent_txn_id=get(sc.TXN_PARENT),
        call_path=call_path,
    )
