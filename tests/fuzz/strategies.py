"""Hypothesis strategies for session files and event streams: documents shaped like the real
ones (the keys agenttrace reads, ids like its ids), whose values are often of the right kind and
often anything JSON can hold, so generated files get past the readers' first checks and reach
the views that trust what the readers let through."""

from __future__ import annotations

import gzip
import json
from typing import Any

from hypothesis import strategies as st

from agenttrace.record.events import EVENT_TYPES

from .mutate import ODD_DIGITS, TRAVERSAL

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**300]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
"""Anything a JSON document can hold, NaN and infinities included (Python's json reads them)."""

ids = st.one_of(
    st.builds(lambda n: f"msg_{n:03d}", st.integers(0, 60)),
    st.builds(lambda n: f"agent_{n:03d}", st.integers(0, 8)),
    st.builds(lambda p, d: p + d, st.sampled_from(["msg_", "agent_"]), st.sampled_from(ODD_DIGITS)),
    st.sampled_from(TRAVERSAL),
    st.text(max_size=12),
)
"""Ids as agenttrace writes them, with digits ``int`` refuses, paths, and any text."""


@st.composite
def _or_anything(draw: st.DrawFn, plausible: st.SearchStrategy[Any], odds: int) -> Any:
    # A die rather than one_of(plausible, plausible, ..., json_values): one_of merges equal
    # branches, which would make it one in two. A middle face, since hypothesis favours the
    # ends of a range; it shrinks towards 0, the plausible value.
    if draw(st.integers(0, odds - 1)) == odds // 2:
        return draw(json_values)
    return draw(plausible)


def sometimes(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``plausible``, one time in four any JSON value at all."""
    return _or_anything(plausible, 4)


def rarely(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``plausible``, once in sixteen any JSON value: for the fields the readers check, where
    one wrong value in a file refuses the whole file and nothing reaches the views."""
    return _or_anything(plausible, 16)


hex_ids = st.one_of(
    st.text("0123456789abcdef", min_size=16, max_size=16),
    st.text("0123456789abcdef", min_size=32, max_size=32),
    st.sampled_from(["0" * 16, "0" * 32, "f" * 5000, "\u0663" * 16]),
)
times_ms = st.one_of(
    st.integers(0, 2**45), st.floats(allow_nan=True, allow_infinity=True), st.just(-1)
)

tool_calls = st.lists(
    st.fixed_dictionaries(
        {"id": sometimes(ids)},
        optional={
            "type": sometimes(st.just("function")),
            "function": rarely(
                st.fixed_dictionaries(
                    {
                        "name": sometimes(st.sampled_from(["task", "discuss", "search"])),
                        "arguments": sometimes(
                            st.one_of(
                                st.builds(json.dumps, st.fixed_dictionaries({"name": json_values})),
                                st.text(max_size=30),
                            )
                        ),
                    }
                )
            ),
        },
    ),
    max_size=3,
)

events = st.fixed_dictionaries(
    {
        "message_id": rarely(ids),
        "event_type": rarely(st.sampled_from(EVENT_TYPES)),
        "agent_id": rarely(ids),
    },
    optional={
        "role": sometimes(st.sampled_from(["system", "user", "assistant", "tool", "other"])),
        "content": sometimes(st.text(max_size=40)),
        "tool_calls": rarely(tool_calls),
        "tool_call_id": sometimes(ids),
        "substance": sometimes(ids),
        "content_id": sometimes(ids),
        "cause": sometimes(st.one_of(ids, st.lists(ids, max_size=3))),
        "caused_by": sometimes(ids),
        "name": sometimes(st.sampled_from(["Jack", "Jill", "", "a,b"])),
        "language_model": sometimes(st.text(max_size=20)),
        "ts": sometimes(st.sampled_from(["2025-01-01T00:00:00.000Z", "2025-13-45T99:99:99.999Z"])),
        "trace_id": sometimes(hex_ids),
        "span_id": sometimes(hex_ids),
        "path": sometimes(st.sampled_from(["0", "1", "1.1", "1.1:2.1.1"])),
    },
)
"""Canonical events (docs/events.md), in either spelling, fields right or wrong."""

_span = st.fixed_dictionaries(
    {},
    optional={
        "name": sometimes(st.text(max_size=12)),
        "kind": sometimes(st.sampled_from(["INTERNAL", "CLIENT", "weird"])),
        "traceId": sometimes(hex_ids),
        "spanId": sometimes(hex_ids),
        "parentSpanId": sometimes(hex_ids),
        "startTimeUnixNano": sometimes(st.integers(0, 2**64)),
        "endTimeUnixNano": sometimes(st.integers(-1, 2**64)),
        "attributes": sometimes(st.dictionaries(st.text(max_size=10), json_values, max_size=4)),
        "events": sometimes(
            st.lists(
                st.fixed_dictionaries(
                    {"name": sometimes(st.text(max_size=8)), "timeUnixNano": json_values}
                ),
                max_size=2,
            )
        ),
        "links": sometimes(
            st.lists(st.fixed_dictionaries({"traceId": hex_ids, "spanId": hex_ids}), max_size=2)
        ),
        "status": sometimes(st.fixed_dictionaries({"code": st.sampled_from(["OK", "ERROR"])})),
        "flags": json_values,
        "droppedAttributesCount": json_values,
    },
)
_accounting = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "type": sometimes(st.sampled_from(["llm", "tool"])),
            "status": sometimes(st.sampled_from(["ok", "failed"])),
            "tokens": sometimes(
                st.dictionaries(
                    st.sampled_from(["inputTokens", "outputTokens", "cacheReadInputTokens"]),
                    sometimes(st.integers(-5, 2**64)),
                )
            ),
            "costUsd": sometimes(st.floats(allow_nan=True, allow_infinity=True)),
            "provider": sometimes(st.text(max_size=8)),
            "model": sometimes(st.text(max_size=8)),
            "charactersIn": json_values,
        },
    ),
    max_size=2,
)


def _node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """An opTree node of any level: SessionNode, TurnNode or OperationNode keys, mixed."""
    return st.fixed_dictionaries(
        {},
        optional={
            "path": sometimes(st.sampled_from(["0", "1", "1.1", "1.1:2", "2.3.1.1"])),
            "kind": sometimes(st.sampled_from(["llm", "tool", "session", "turn"])),
            "name": sometimes(st.text(max_size=10)),
            "agentId": sometimes(ids),
            "agentName": sometimes(st.text(max_size=10)),
            "traceId": sometimes(hex_ids),
            "spanId": sometimes(hex_ids),
            "opId": sometimes(hex_ids),
            "id": sometimes(hex_ids),
            "txnId": sometimes(hex_ids),
            "index": sometimes(st.integers(-1, 5)),
            "status": sometimes(st.sampled_from(["ok", "failed"])),
            "success": sometimes(st.booleans()),
            "error": sometimes(st.text(max_size=10)),
            "startedAt": sometimes(times_ms),
            "endedAt": sometimes(times_ms),
            "latencyMs": sometimes(times_ms),
            "attributes": sometimes(st.dictionaries(st.text(max_size=10), json_values)),
            "accounting": sometimes(_accounting),
            "span": sometimes(_span),
            "request": sometimes(st.fixed_dictionaries({"payload": json_values})),
            "logs": sometimes(st.lists(st.dictionaries(st.text(max_size=6), json_values))),
            "reasoning": sometimes(
                st.fixed_dictionaries({"chunks": st.lists(st.dictionaries(st.text(), json_values))})
            ),
            "resource": sometimes(
                st.fixed_dictionaries({"attributes": st.dictionaries(st.text(), json_values)})
            ),
            "scope": sometimes(st.dictionaries(st.sampled_from(["name", "version"]), json_values)),
            "recording": sometimes(
                st.dictionaries(st.sampled_from(["captureContent", "maxPayloadBytes"]), json_values)
            ),
            "turns": st.lists(children, max_size=3),
            "ops": st.lists(children, max_size=3),
            "childSessions": st.lists(children, max_size=2),
            "childSession": children,
        },
    )


nodes = st.recursive(st.fixed_dictionaries({}), _node, max_leaves=10)
"""opTree nodes nested as the tree nests them (and as it does not)."""


documents = st.fixed_dictionaries(
    {
        "format": st.just("agenttrace.session"),
        "version": st.just(1),
        "session_id": sometimes(ids),
        "runs": sometimes(st.lists(nodes, max_size=3)),
        "meta": sometimes(
            st.dictionaries(st.sampled_from(["createdAt", "session_id", "x"]), json_values)
        ),
        "events": st.lists(events, max_size=12),
    }
)
"""Session file documents with the header right (a wrong one is refused before anything else
is read; the mutations try those), so everything else is read."""


def snapshot_bytes(document: Any) -> bytes:
    """A document as a session file: JSON (``NaN`` and ``Infinity`` as Python writes them), gzip."""
    return gzip.compress(_dumps(document).encode("utf-8", "surrogatepass"), mtime=0)


def stream_bytes(lines: list[Any], junk: bytes) -> bytes:
    """Events as an event stream, one JSON line each, then ``junk`` (a torn or odd last line)."""
    text = "".join(_dumps(line) + "\n" for line in lines)
    return text.encode("utf-8", "surrogatepass") + junk


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


stream_junk = st.sampled_from([b"", b"", b"", b'{"message_id": "msg_0', b"\n\n", b"[1]\n", b"\xff"])
