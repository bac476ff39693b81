"""Hypothesis strategies for session files and event streams, derived from the format's structs
(agenttrace/formats/session/schema.py), so that most generated files read as sessions and reach the
views that trust what the readers let through, and some do not.

Every struct is generated from ``msgspec.inspect.type_info`` of the struct: its required fields
always, its optional ones half the time, each value within its type's constraints (the id and
label patterns, the ranges of times, literal kinds), then the rules between fields (``requires``,
``excludes`` and the checks of ``__post_init__``). A field added to a struct is generated with no
change here; a new kind of type or pattern fails loudly until it has a generator. What the types
leave open is filled with values like agenttrace's own (``msg_001``, ``agent_002``, ``task``
calls naming agents, labels that match a node's place in the tree), and one time in four with
odd values the schema still accepts (:func:`sometimes`: an agent id with Unicode digits or
``../`` in it, any label, text with quotes, controls or emoji, the ends of a number's range).

A file is refused as a whole if any one field is wrong, so wrong values are not scattered over
the fields: one document or stream in :data:`WRONG_ONE_IN` gets one to three of the value
mutations of tests/fuzz/mutate.py (another type, NaN, a huge number, a deep nesting, an odd id,
a field deleted or copied) anywhere in it.

The values come from a ``random.Random`` seeded by hypothesis, not from a hypothesis draw each:
a document holds a thousand values, and drawing each made a document cost 150 ms. Hypothesis
still draws (and shrinks) what is done wrong to a document; the document itself is shown whole.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import string
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from hypothesis import strategies as st
from msgspec import inspect as mi

from agenttrace.formats.session import schema
from agenttrace.model.events import agent_id, message_id
from agenttrace.model.paths import format_label

from .mutate import ODD_DIGITS, TRAVERSAL, Mutator, expand_nesting

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
"""Anything Python's ``json`` writes, NaN and infinities included (the readers refuse those)."""

Build = Callable[[random.Random], Any]
"""Makes one value from a random generator."""

WRONG_ONE_IN = 3
"""One generated document or stream in this many has something wrong in it (one to three value
mutations); the others follow the schema, so they reach the views."""
ODD_ONE_IN = 4
"""How often :func:`sometimes` gives its odd value."""


def sometimes(usual: Build, odd: Build) -> Build:
    """Mostly ``usual``, one time in :data:`ODD_ONE_IN` ``odd``: a value the schema accepts
    that agenttrace never writes."""
    return lambda rng: odd(rng) if rng.randrange(ODD_ONE_IN) == 0 else usual(rng)


def _choice(values: Sequence[Any]) -> Build:
    return lambda rng: rng.choice(values)


def _just(value: Any) -> Build:
    return lambda rng: value


# --- values like agenttrace's, and odd ones ------------------------------------------------------

_ODD_CHARACTERS = (
    *'"\\<>&\'/', "</script>", "\x00", "\n", "\t", "\x7f", "\u2028", "\u202e", "\ufeff",
    "é", "中", "\u0663", "\U0001f642", "\U0010ffff", "%s", "{0}", "[/red]", "\x1b[31m",
)  # fmt: skip
"""Characters that matter to JSON, HTML, terminals, rich markup, format strings."""
_PLAIN = string.ascii_letters + string.digits + " _-."


def _text(most: int = 20, least: int = 0) -> Callable[[random.Random], str]:
    """Text, mostly plain, with odd characters in one string out of four."""

    def build(rng: random.Random) -> str:
        size = rng.randint(least, most)
        if rng.randrange(4):
            return "".join(rng.choices(_PLAIN, k=size))
        pieces = [
            rng.choice(_ODD_CHARACTERS if rng.randrange(3) == 0 else _PLAIN) for _ in range(size)
        ]
        return "".join(pieces)[: max(most, least)]  # an odd character may be several

    return build


def _from(alphabet: str, least: int, most: int) -> Callable[[random.Random], str]:
    return lambda rng: "".join(rng.choices(alphabet, k=rng.randint(least, most)))


_HEX = "0123456789abcdef"
texts = _text(40)
_short_texts = _text()
_keys = _text(8)


def _address(rng: random.Random, most: int, length: int) -> tuple[int, ...]:
    return tuple(rng.randint(1, most) for _ in range(rng.randint(0, length)))


labels = sometimes(
    lambda rng: format_label(_address(rng, 3, 7)),
    lambda rng: format_label(_address(rng, rng.choice((9, 10**6)), 20)),
)
"""Path labels (docs/path-labels.md) of small trees, now and then of deep and wide ones."""

step_labels = sometimes(
    labels,
    lambda rng: f"{labels(rng)}{rng.choice('/~')}{rng.choice((2, 3, rng.randint(2, 10**6)))}",
)
"""A journal step's label: a path label, now and then one a re-entry gave another request
there (``2.1/2``; docs/journal.md, Idempotency keys) or a value read there inside
``agenttrace.deterministic()`` (``2.1~3``)."""


_STEM = string.ascii_letters + string.digits + "_.-"


def _name_stem(rng: random.Random) -> str:
    """A session id that is not hex: a plain file-name stem, up to 128 characters, no ``..``."""
    stem = rng.choice(string.ascii_letters + string.digits)
    stem += "".join(rng.choices(_STEM, k=rng.randint(0, rng.choice((8, 127)))))
    while ".." in stem:
        stem = stem.replace("..", ".a")
    return stem[:128]


def _printable(rng: random.Random) -> str:
    """An agent id the application gave: printable, Unicode, or climbing out of a directory."""
    kind = rng.randrange(3)
    if kind == 0:
        return rng.choice([*TRAVERSAL, "9" * 256, " ", "Jack", "agent_1"])
    if kind == 1:
        return "agent_" + rng.choice(ODD_DIGITS[:5])
    text = _short_texts(rng)
    return "".join(c for c in text if c.isprintable() and c != "\x7f") or "x"


_any_message_id = _from(string.ascii_letters + string.digits + "_.:-", 1, 128)
message_ids = sometimes(
    lambda rng: message_id(rng.randint(1, 40)),
    lambda rng: (
        rng.choice(("msg_" + "9" * 124, "msg_0001", "msg_-1", ":", "msg_1.5"))
        if rng.randrange(2)
        else _any_message_id(rng)
    ),
)
agent_ids = sometimes(lambda rng: agent_id(rng.randint(1, 6)), _printable)
session_ids = sometimes(_from(_HEX, 16, 16), _name_stem)
agent_names = sometimes(_choice(["Root", "Jack", "Jill", "Searcher"]), _text(12))
call_ids = sometimes(lambda rng: f"call_{rng.randint(1, 5)}", _text(12))


def _timestamp(rng: random.Random) -> str:
    """Any time the pattern takes: February 31st and the year 0000 included."""
    return (
        f"{rng.randint(0, 9999):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}T"
        f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}."
        f"{rng.randint(0, 999):03d}Z"
    )


_PATTERNS: dict[str, Build] = {
    schema.SESSION_ID_PATTERN: session_ids,
    schema.TRACE_ID_PATTERN: sometimes(_choice(["1" * 32, "2" * 32]), _from(_HEX, 32, 32)),
    schema.SPAN_ID_PATTERN: sometimes(_from(_HEX, 16, 16), _choice(["0" * 16, "f" * 16])),
    schema.LABEL_PATTERN: labels,
    schema.STEP_LABEL_PATTERN: step_labels,
    schema.MESSAGE_ID_PATTERN: message_ids,
    schema.AGENT_ID_PATTERN: agent_ids,
    schema.TIMESTAMP_PATTERN: sometimes(_just("2026-01-01T00:00:00.000Z"), _timestamp),
    schema.FINGERPRINT_PATTERN: lambda rng: "sha256:" + _from(_HEX, 64, 64)(rng),
}
"""The schema's patterns, each with the values agenttrace writes and odd ones that match."""


def _scalar(rng: random.Random) -> Any:
    kind = rng.randrange(5)
    if kind == 0:
        return _short_texts(rng)
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return _any_int(rng)
    if kind == 3:
        return _float(rng)
    return None


def json_data(rng: random.Random, leaves: int = 8) -> Any:
    """What a JSON reader reads: no NaN, no infinity, no integer past 64 bits."""
    if leaves <= 1 or rng.randrange(3):
        return _scalar(rng)
    size = rng.randint(0, 4)
    if rng.randrange(2):
        return [json_data(rng, leaves // 2) for _ in range(size)]
    return {_keys(rng): json_data(rng, leaves // 2) for _ in range(size)}


def _int(low: int, high: int, usual: tuple[int, int]) -> Build:
    """Integers in ``usual`` mostly, else anywhere in [``low``, ``high``], often at an end."""
    edges = [n for n in (low, high, low + 1, high - 1, 0, 1, 2**31, 2**53 + 1) if low <= n <= high]

    def build(rng: random.Random) -> int:
        if rng.randrange(ODD_ONE_IN):
            return rng.randint(*usual)
        return rng.choice(edges) if rng.randrange(2) else rng.randint(low, high)

    return build


def _float(rng: random.Random) -> float:
    if rng.randrange(ODD_ONE_IN):
        return round(rng.uniform(0, 100_000), rng.randint(0, 6))
    if rng.randrange(2):
        return rng.choice((0.0, -0.0, 1e308, -1e308, 5e-324, -1.5, 2.0**53 + 2, 1e-7))
    return rng.uniform(-1e300, 1e300)


def _booleans(rng: random.Random) -> bool:
    return rng.random() < 0.5


_any_int = _int(-(2**63), 2**63 - 1, (0, 1000))
_MS_NOW = 1_795_397_263_940
_MS = (_MS_NOW, _MS_NOW + 10**6)
_NS = (_MS_NOW * 10**6, _MS_NOW * 10**6 + 10**12)


def _ingress(rng: random.Random) -> dict[str, Any]:
    """How a run started: nested objects whose leaves are strings, booleans or numbers."""
    ingress: dict[str, Any] = {"source": sometimes(_choice(["cli", "api", "web"]), texts)(rng)}
    if rng.randrange(2):
        ingress["cli"] = {"pid": rng.randint(1, 2**22), "argv0": texts(rng)}
    if rng.randrange(4) == 0:
        leaf = rng.choice((_short_texts, _booleans, _any_int))
        ingress[texts(rng)] = {texts(rng): {"x": leaf(rng)}, "y": leaf(rng)}
    return ingress


_ATTRIBUTE_KEYS = (
    "agenttrace.path",
    "agenttrace.kind",
    "agenttrace.agent.id",
    "agenttrace.txn.id",
    "gen_ai.agent.name",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "agenttrace.cost.usd",
    "service.name",
)
_attribute_keys = sometimes(_choice(_ATTRIBUTE_KEYS), _text(12))


def _list_of(item: Build, least: int, most: int) -> Build:
    return lambda rng: [item(rng) for _ in range(rng.randint(least, most))]


def _attributes(rng: random.Random) -> dict[str, Any]:
    """OpenTelemetry attributes: a string, boolean or number, or an array of them, by key."""
    value = rng.choice((_short_texts, _scalar_attribute, _scalar_attributes))
    return {_attribute_keys(rng): value(rng) for _ in range(rng.randint(0, 4))}


def _scalar_attribute(rng: random.Random) -> Any:
    value = _scalar(rng)
    return "" if value is None else value


_scalar_attributes = _list_of(_scalar_attribute, 0, 3)


def _json_text(rng: random.Random) -> str:
    return json.dumps(json_data(rng)) if rng.randrange(2) else texts(rng)


def _causes(rng: random.Random) -> Any:
    return message_ids(rng) if rng.randrange(3) else _list_of(message_ids, 1, 3)(rng)


def _content(rng: random.Random) -> Any:
    """A message's content: text, a list of parts, or (odd) any JSON value but null."""
    if rng.randrange(ODD_ONE_IN):
        return texts(rng)
    if rng.randrange(2):
        return [{"type": "text", "text": texts(rng)} for _ in range(rng.randint(0, 2))]
    value = json_data(rng)
    return "" if value is None else value


_VALUES: dict[tuple[type, str], Build] = {
    (schema.AgentCreated, "name"): agent_names,
    (schema.AgentCreated, "language_model"): _choice(["anthropic/claude", "gpt-4o", ""]),
    (schema.AgentCreated, "cause"): _causes,
    (schema.AgentCreated, "caused_by"): _causes,
    (schema.PieceOfText, "cause"): _causes,
    (schema.PieceOfText, "caused_by"): _causes,
    (schema.TranscriptEntry, "role"): sometimes(
        _choice(["system", "user", "assistant", "tool"]), texts
    ),
    (schema.TranscriptEntry, "content"): _content,
    (schema.TranscriptEntry, "name"): agent_names,
    (schema.TranscriptEntry, "tool_call_id"): call_ids,
    (schema.ToolCall, "id"): sometimes(call_ids, _just(None)),
    (schema.ToolCall, "type"): sometimes(_just("function"), texts),
    (schema.ToolFunction, "name"): sometimes(_choice(["task", "discuss", "search"]), texts),
    (schema.ToolFunction, "arguments"): sometimes(
        lambda rng: json.dumps({"name": agent_names(rng)}), _json_text
    ),
    (schema.SessionAttributes, "ingress"): _ingress,
    (schema.SessionMeta, "ingress"): _ingress,
    (schema.Span, "attributes"): _attributes,
    (schema.SpanEvent, "attributes"): _attributes,
    (schema.Resource, "attributes"): _attributes,
    (schema.Payload, "payload"): _json_text,
    (schema.LogEntry, "details"): _json_text,
    (schema.RootSessionNode, "agentName"): agent_names,
    (schema.ChildSessionNode, "agentName"): agent_names,
    (schema.OperationNode, "name"): sometimes(
        _choice(["task", "discuss", "search", "claude-sonnet-4-5"]), texts
    ),
    (schema.OperationNode, "childSession"): _just(None),  # from childSessions (_fix_op)
    (schema.Step, "run"): sometimes(session_ids, _text(20, 1)),
    (schema.Step, "attempt"): sometimes(_just(1), _int(1, 1_000_000, (1, 3))),
    (schema.Step, "name"): sometimes(
        _choice(["discuss", "search", "claude-sonnet-4-5", "Agent"]), texts
    ),
    (schema.Step, "arguments"): sometimes(
        lambda rng: json.dumps({"name": agent_names(rng)}), _json_text
    ),
    (schema.Step, "result"): lambda rng: _json_text(rng) if rng.randrange(2) else json_data(rng),
    (schema.StepDecision, "run"): sometimes(session_ids, _text(20, 1)),
    (schema.StepDecision, "attempt"): sometimes(_just(1), _int(1, 1_000_000, (1, 3))),
    (schema.StepDecision, "result"): _json_text,
}
"""Values for fields whose type leaves them open, by (struct, JSON key)."""

MAX_SUB_AGENT_DEPTH = 2
"""Sub-agent runs nest at most this deep: a generated tree stays small."""
_SIZES: dict[str, tuple[int, int]] = {
    "runs": (1, 2),
    "turns": (0, 2),
    "ops": (0, 3),
    "childSessions": (1, 2),
    "events": (0, 12),
    "journal": (0, 4),
}
"""How many items a list of this key gets (others: up to 2), so a document stays small; a
document always has a run (a file of events alone is a mutation of the seeds)."""


# --- generators from the structs -----------------------------------------------------------------


def conforming(info: mi.Type, depth: int = 0) -> Build:
    """Makes values of the type ``info`` (from ``msgspec.inspect``) within its constraints;
    ``depth``: how many sub-agent runs deep they are."""
    if isinstance(info, mi.Metadata):
        return conforming(info.type, depth)
    if isinstance(info, mi.StructType):
        return _struct(info.cls, depth)
    if isinstance(info, mi.UnionType):
        options = [conforming(t, depth) for t in info.types if not isinstance(t, mi.NoneType)]
        one = _choice(options)
        some: Build = lambda rng: one(rng)(rng)  # noqa: E731
        return some if len(options) == len(info.types) else sometimes(some, _just(None))
    if isinstance(info, mi.LiteralType):
        return _choice(info.values)
    if isinstance(info, mi.StrType):
        if info.pattern is None:
            return _text(min(info.max_length or 20, 20), info.min_length or 0)
        if info.pattern not in _PATTERNS:
            raise LookupError(f"no generator for the pattern {info.pattern!r}: add it")
        return _PATTERNS[info.pattern]
    if isinstance(info, mi.IntType):
        low = info.ge if info.ge is not None else -(2**63)
        high = info.le if info.le is not None else 2**63 - 1
        if info.le == schema.MAX_EPOCH_NS:
            return _int(low, high, _NS)
        if info.le == schema.MAX_EPOCH_NS // 1_000_000:
            return _int(low, high, _MS)
        return _int(low, high, (max(low, 0), min(high, 10_000)))
    if isinstance(info, mi.FloatType):
        return _float
    if isinstance(info, mi.BoolType):
        return _booleans
    if isinstance(info, mi.NoneType):
        return _just(None)
    if isinstance(info, mi.ListType):
        return _list_of(
            conforming(info.item_type, depth), info.min_length or 0, min(info.max_length or 2, 2)
        )
    if isinstance(info, mi.DictType):
        key, value = conforming(info.key_type, depth), conforming(info.value_type, depth)
        return lambda rng: {key(rng): value(rng) for _ in range(rng.randint(0, 3))}
    if isinstance(info, mi.AnyType):
        return json_data
    raise TypeError(f"no generator for {info!r}: add one")  # a new kind of type in the schema


@cache
def _struct(cls: type, depth: int) -> Build:
    """Makes objects of the struct ``cls`` (cached: the tree's structs recur)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    if cls is schema.ChildSessionNode:
        depth += 1
    values = {f.encode_name: _field_values(cls, f, depth) for f in info.fields}
    return lambda rng: _object(rng, info, values, depth)


def _field_values(cls: type, f: mi.Field, depth: int) -> Build:
    given = _VALUES.get((cls, f.encode_name))
    if given is not None:
        return given
    if f.encode_name == "childSessions" and depth >= MAX_SUB_AGENT_DEPTH:
        return _just([])  # never drawn (_present): the recursion of the structs ends here
    info = f.type.type if isinstance(f.type, mi.Metadata) else f.type
    if isinstance(info, mi.ListType) and f.encode_name in _SIZES:
        least, most = _SIZES[f.encode_name]
        return _list_of(conforming(info.item_type, depth), max(least, info.min_length or 0), most)
    return conforming(f.type, depth)


def _object(
    rng: random.Random, info: mi.StructType, values: Mapping[str, Build], depth: int
) -> dict[str, Any]:
    cls = info.cls
    obj: dict[str, Any] = {}
    if info.tag_field is not None:
        obj[info.tag_field] = info.tag
    for f in info.fields:
        if f.required or _present(rng, f.encode_name, depth):
            obj[f.encode_name] = values[f.encode_name](rng)
    requires: Mapping[str, Sequence[str]] = getattr(cls, "requires", {})
    missing = [o for k, others in requires.items() if k in obj for o in others if o not in obj]
    while missing:  # a key that comes with another: both (and whatever that one needs)
        for key in missing:
            obj[key] = values[key](rng)
        missing = [o for k, others in requires.items() if k in obj for o in others if o not in obj]
    for key, refused in getattr(cls, "excludes", {}).items():
        if key in obj:
            for other in refused:
                obj.pop(other, None)
    fix = _FIXES.get(cls)
    if fix is not None:
        fix(rng, obj, values)
    if not info.forbid_unknown_fields and rng.randrange(4) == 0:  # meta keeps unknown keys
        obj["x" + _keys(rng)] = json_data(rng)
    return obj


def _present(rng: random.Random, key: str, depth: int) -> bool:
    if key == "childSession":  # made from childSessions (_fix_op)
        return False
    if key == "childSessions":
        return depth < MAX_SUB_AGENT_DEPTH and rng.randrange(5) == 0
    return rng.random() < 0.5


_Fix = Callable[[random.Random, dict[str, Any], Mapping[str, Build]], None]


def _fix_accounting(rng: random.Random, entry: dict[str, Any], values: Mapping[str, Build]) -> None:
    """An LLM entry has the LLM fields and none of the tool's; a tool entry the reverse."""
    cls = schema.AccountingEntry
    llm = entry["type"] == "llm"
    needed, refused = (
        (cls._LLM_ONLY, cls._TOOL_ONLY + cls._TOOL_OPTIONAL)
        if llm
        else (cls._TOOL_ONLY, cls._LLM_ONLY[1:] + cls._LLM_OPTIONAL)
    )
    for key in refused:
        entry.pop(key, None)
    for key in needed:
        if key not in entry:
            entry[key] = values[key](rng)


def _fix_piece_of_text(
    rng: random.Random, event: dict[str, Any], values: Mapping[str, Build]
) -> None:
    """A piece of text has a cause, in either spelling."""
    if "cause" not in event and "caused_by" not in event:
        event["cause"] = values["cause"](rng)


def _fix_transcript_reset(
    rng: random.Random, event: dict[str, Any], values: Mapping[str, Build]
) -> None:
    """A reset's ``reused`` counts add up to its ``entries``."""
    reused = event.get("reused")
    if reused is None:
        return
    new = sum(piece for piece in reused if isinstance(piece, int))
    if new or "entries" in event:
        event["entries"] = new


def _fix_op(rng: random.Random, op: dict[str, Any], values: Mapping[str, Build]) -> None:
    """An op's sub-agent runs as a release wrote them: ``childSession`` alone when it hosted
    one and ``childSessions`` alone when it hosted several (this release), or both keys with
    ``childSession`` the first run (earlier releases)."""
    hosted = op.get("childSessions")
    if hosted is None:
        return
    if rng.randrange(3) == 0:
        op["childSession"] = hosted[0]
    elif len(hosted) == 1:
        op["childSession"] = op.pop("childSessions")[0]


def hosted_runs(op: Mapping[str, Any]) -> list[Any]:
    """The sub-agent runs of a generated ``op``, in whichever form it has them (_fix_op)."""
    if "childSessions" in op:
        return list(op["childSessions"])
    return [op["childSession"]] if "childSession" in op else []


_FIXES: dict[type, _Fix] = {
    schema.AccountingEntry: _fix_accounting,
    schema.PieceOfText: _fix_piece_of_text,
    schema.TranscriptReset: _fix_transcript_reset,
    schema.OperationNode: _fix_op,
}
"""The rules ``__post_init__`` checks beyond ``requires`` and ``excludes``, by struct."""


# --- documents and streams ------------------------------------------------------------------------


def _cohere(document: dict[str, Any]) -> None:
    """Make ``document`` hang together as agenttrace's do: one session id throughout, labels and
    turn numbers by place in the tree, an op's kind as its accounting and sub-agents say, spans
    linked to their parents, message ids in order."""
    session = document["session_id"]
    document["meta"]["session_id"] = session
    trace_ids = []
    for number, run in enumerate(document["runs"]):
        run["sessionId"] = session
        if number == 0:
            run["id"] = run["txnId"] = run["originTxnId"] = session
        if run["traceId"] is not None:
            trace_ids.append(run["traceId"])
        _cohere_run(run, (), None, run["traceId"])
    if "trace_ids" in document["meta"]:
        document["meta"]["trace_ids"] = trace_ids
    _renumber(document["events"])
    _cohere_journal(document)


def _cohere_journal(document: dict[str, Any]) -> None:
    """The journal's lines about the document's runs, two by two at one key (an ``intent``
    and its outcome, or two intents: a call in doubt, a decision about a step), each at one of
    its run's ops (``0`` for a run's own line), by the run's agent."""
    runs = document["runs"]
    for number, line in enumerate(document.get("journal", ())):
        place = number // 2
        run = runs[place % len(runs)]
        ops = [op["path"] for turn in run["turns"] for op in turn["ops"]]
        line["run"] = run["originTxnId"]
        if line.get("kind") == "run" or not ops:
            line["step"] = "0"
        else:
            line["step"] = ops[place % len(ops)]
        if "agent_id" in line:
            line["agent_id"] = run["agentId"]


def _cohere_run(run: dict[str, Any], at: tuple[int, ...], parent: Any, trace: Any) -> None:
    run["path"] = format_label(at)
    _link(run, "spanId", parent, trace)
    for k, turn in enumerate(run["turns"], 1):
        turn["path"], turn["index"] = format_label((*at, k)), k
        _link(turn, "id", run["spanId"], trace)
        for j, op in enumerate(turn["ops"], 1):
            op["path"] = format_label((*at, k, j))
            _link(op, "opId", turn["id"], trace)
            for entry in op["accounting"]:
                entry.update(path=op["path"], txnId=run["txnId"], agentId=run["agentId"])
                entry.update(originTxnId=run["originTxnId"], callPath=run["callPath"])
                op["kind"] = "llm" if entry["type"] == "llm" else "tool"
            runs = hosted_runs(op)
            if runs:
                op["kind"] = "session"
            if "span" in op:
                op["span"]["kind"] = "CLIENT" if op["kind"] == "llm" else "INTERNAL"
            for n, child in enumerate(runs, 1):
                child["parentTxnId"], child["originTxnId"] = run["txnId"], run["originTxnId"]
                child["traceId"] = trace
                _cohere_run(child, (*at, k, j, n), op["opId"], trace)


def _link(node: dict[str, Any], id_key: str, parent: Any, trace: Any) -> None:
    span = node.get("span")
    if span is None:  # optional: files of the first release have none
        return
    span["spanId"], span["parentSpanId"], span["traceId"] = node[id_key], parent, trace


_NOT_EVENTS = ("step", "step_decision", schema.OP_ACCOUNTED)
"""The kinds of a stream's lines that are no canonical event: no message id."""


def _renumber(events: list[Any]) -> None:
    """Message ids in order, on the canonical events (a stream's other lines have none)."""
    number = 0
    for event in events:
        if event.get("event_type") not in _NOT_EVENTS:
            number += 1
            event["message_id"] = message_id(number)


def _cohere_stream(lines: list[Any]) -> None:
    """A stream's events numbered in order, and its journal lines about one run, two by two at
    one key, by the agents its events name."""
    _renumber(lines)
    agents = [
        line["agent_id"]
        for line in lines
        if line.get("event_type") not in _NOT_EVENTS and "agent_id" in line
    ] or ["agent_001"]
    journal = [line for line in lines if line.get("event_type") in _NOT_EVENTS[:2]]
    for number, line in enumerate(journal):
        line["run"] = journal[0]["run"]
        line["step"] = journal[number - number % 2]["step"]
        if "agent_id" in line:
            line["agent_id"] = agents[number // 2 % len(agents)]


def _coherent(build: Build, cohere: Callable[[Any], None]) -> Build:
    def coherent(rng: random.Random) -> Any:
        value = build(rng)
        if rng.randrange(4):  # one in four is left as made: ids, labels and links at random
            cohere(value)
        return value

    return coherent


def _seeded(build: Build) -> st.SearchStrategy[Any]:
    """What ``build`` makes from a generator seeded by hypothesis."""
    return st.integers(0, 2**64 - 1).map(lambda seed: build(random.Random(seed)))


@st.composite
def _wronged(draw: st.DrawFn, value: Any, one_in: int = WRONG_ONE_IN) -> Any:
    """``value``, or (one time in ``one_in``) a copy with one to three of the fuzz suite's
    value mutations."""
    if draw(st.integers(0, one_in - 1)) != one_in // 2:  # a middle face: shrinks to none
        return value
    mutator = Mutator(draw(st.randoms(use_true_random=True)))  # uniform over the slots
    wronged = copy.deepcopy(value)
    for _ in range(draw(st.integers(1, 3))):
        wronged, _how = mutator.value_mutation(wronged)
    return wronged


make_document = _coherent(conforming(mi.type_info(schema.SessionFile)), _cohere)
"""Makes a session file document (docs/session-file.md) that follows the schema."""
make_event = conforming(mi.type_info(schema.Event))
"""Makes a canonical event (docs/events.md), in either spelling, that follows the schema."""
make_journal_line = conforming(mi.type_info(schema.JournalLine))
"""Makes a line of the step journal (docs/journal.md): a step or a decision."""
make_accounted = conforming(mi.type_info(schema.OpAccounted))
"""Makes a stream's ``op_accounted`` line (docs/events.md, "Accounting lines")."""


def _stream_lines(rng: random.Random) -> list[Any]:
    """A stream's lines: canonical events, and among them journal and accounting lines."""
    lines = _list_of(make_event, 1, 15)(rng)
    for other in [*_list_of(make_journal_line, 0, 6)(rng), *_list_of(make_accounted, 0, 2)(rng)]:
        lines.insert(rng.randint(0, len(lines)), other)
    return lines


make_event_lines = _coherent(_stream_lines, _cohere_stream)
"""Makes the lines of a stream: its events (message ids in order, but one time in four), its
step journal's lines and ``op_accounted`` lines between them."""

valid_documents = _seeded(make_document)
documents = valid_documents.flatmap(_wronged)
"""Session file documents, one in :data:`WRONG_ONE_IN` with something wrong in it."""
events = _seeded(make_event).flatmap(lambda event: _wronged(event, 2))
"""Canonical events, one in two with something wrong: for the views that take events from
code, with no reader in front of them."""
valid_event_lines = _seeded(make_event_lines)
event_lines = valid_event_lines.flatmap(_wronged)
"""The lines of an event stream (events, journal and accounting lines), one stream in
:data:`WRONG_ONE_IN` with something wrong (in any line: the journal's get every mutation)."""


def snapshot_bytes(document: Any) -> bytes:
    """A document as a session file: JSON (``NaN`` and ``Infinity`` as Python writes them), gzip."""
    return gzip.compress(_dumps(document).encode("utf-8", "surrogatepass"), mtime=0)


def stream_bytes(lines: list[Any], junk: bytes) -> bytes:
    """Events as an event stream, one JSON line each, then ``junk`` (a torn or odd last line)."""
    text = "".join(_dumps(line) + "\n" for line in lines)
    return text.encode("utf-8", "surrogatepass") + junk


def _dumps(value: Any) -> str:
    return expand_nesting(json.dumps(value, ensure_ascii=False))


stream_junk = st.sampled_from([b"", b"", b"", b'{"message_id": "msg_0', b"\n\n", b"[1]\n", b"\xff"])
