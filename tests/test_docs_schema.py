"""The published schema (generated from agenttrace/formats/session/schema.py, shipped with the
package and copied to docs/session-file.schema.json) describes what agenttrace writes: the cafe
demo's session file, each line of its event stream and each line of its billing ledger validate
against it, and the schema is strict enough to notice a change of format."""

from __future__ import annotations

import copy
import gzip
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
import pytest

from agenttrace import format_label, parse_label
from agenttrace.formats.session.schema import LABEL_PATTERN, SCHEMA_ID
from agenttrace.formats.session.schema_file import DOCS_COPY, published_text, schema_text

from .helpers import NOT_EVENTS, ROOT, record_demo

SCHEMA = json.loads((ROOT / "docs" / DOCS_COPY).read_text())


def validator(definition: str | None = None) -> jsonschema.Draft202012Validator:
    """A validator for the whole document, or for one of its ``$defs``."""
    schema = SCHEMA if definition is None else {"$defs": SCHEMA["$defs"], "$ref": definition}
    return jsonschema.Draft202012Validator(schema)


def errors(schema: jsonschema.Draft202012Validator, instance: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in schema.iter_errors(instance)]


@dataclass
class Demo:
    document: dict[str, Any]
    events: list[dict[str, Any]]
    ledger: list[dict[str, Any]]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The cafe demo's files, written by running the example as a user does."""
    directory = tmp_path_factory.mktemp("docs-schema")
    snapshot, stream = record_demo(directory, AGENTTRACE_CONSOLE="quiet")
    ledger = directory / "accounting.jsonl"
    return Demo(
        json.loads(gzip.decompress(snapshot.read_bytes())),
        [json.loads(line) for line in stream.read_text().splitlines()],
        [json.loads(line) for line in ledger.read_text().splitlines()],
    )


@pytest.mark.e2e
def test_the_demo_session_file_matches_the_documented_schema(demo: Demo) -> None:
    assert errors(validator(), demo.document) == []
    assert len(demo.document["runs"]) == 1 and len(demo.document["events"]) == 23
    # A transcript_reset among them (the root sent discuss's results as one message).
    assert [e["event_type"] for e in demo.document["events"]].count("transcript_reset") == 1


@pytest.mark.e2e
def test_each_stream_line_is_a_documented_event(demo: Demo) -> None:
    """Each line a canonical event ($defs/Event), an op's accounting ($defs/OpAccounted) or a
    line of the step journal ($defs/Step): the session file holds the events, the opTree and
    the ledger the same accounting."""
    line_schema = validator("#/$defs/StreamLine")
    event = validator("#/$defs/Event")
    accounted = validator("#/$defs/OpAccounted")
    for line in demo.events:
        assert errors(line_schema, line) == [], line
        if line["event_type"] in ("step", "step_decision"):
            continue  # the step journal's lines: StreamLine covers them
        is_accounting = line["event_type"] == "op_accounted"
        assert errors(accounted if is_accounting else event, line) == [], line
    events = [line for line in demo.events if line["event_type"] not in NOT_EVENTS]
    assert events == demo.document["events"]
    entries = [line["accounting"] for line in demo.events if line["event_type"] == "op_accounted"]
    assert entries == demo.ledger
    accounting = [line for line in demo.events if line["event_type"] == "op_accounted"]
    assert [(line["path"], line["kind"]) for line in accounting] == [
        ("1.1", "llm"), ("1.2", "tool"), ("2.1", "llm"), ("2.2", "tool"), ("3.1", "llm"),
        ("3.2.1.1", "llm"), ("3.2:2.1.1", "llm"), ("3.2", "session"), ("4.1", "llm"),
    ]  # fmt: skip


@pytest.mark.e2e
def test_each_ledger_line_is_a_documented_accounting_entry(demo: Demo) -> None:
    entry = validator("#/$defs/AccountingEntry")
    for line in demo.ledger:
        assert errors(entry, line) == [], line
    assert [line["path"] for line in demo.ledger] == [
        "1.1", "1.2", "2.1", "2.2", "3.1", "3.2.1.1", "3.2:2.1.1", "3.2", "4.1",
    ]  # fmt: skip


def _discuss(document: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = document["runs"][0]["turns"][2]["ops"][1]
    assert op["path"] == "3.2"
    return op


@pytest.mark.e2e
@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: _discuss(d).__setitem__("undocumented", 1), id="unknown op key"),
        pytest.param(lambda d: _discuss(d)["span"].pop("name"), id="span without its name"),
        pytest.param(lambda d: _discuss(d)["childSessions"].clear(), id="no sub-agent run"),
        pytest.param(lambda d: _discuss(d).__setitem__("path", "3.2:1.1"), id="bad label"),
        pytest.param(lambda d: d["runs"][0].pop("resource"), id="root without resource"),
        pytest.param(lambda d: d["events"][12].__setitem__("cause", "msg_011"), id="both links"),
        pytest.param(lambda d: d["meta"].pop("updatedAt"), id="meta without updatedAt"),
        pytest.param(lambda d: d.__setitem__("version", 2), id="another version"),
    ],
)
def test_the_schema_notices_a_change_of_format(demo: Demo, change: Any) -> None:
    document = copy.deepcopy(demo.document)
    change(document)
    assert errors(validator(), document) != []


LABEL = re.compile(SCHEMA["$defs"]["Label"]["pattern"])


def test_the_label_pattern_accepts_exactly_the_canonical_labels() -> None:
    for length in range(8):
        for address in itertools.product((1, 2, 10), repeat=length):
            assert LABEL.match(format_label(address)), address
    for text in ("", "00", "01", "0.1", "1:2", "1.2:0", "3.2:1.1", "1..2", "1.2.", "a"):
        assert not LABEL.match(text), text
        with pytest.raises(ValueError):
            parse_label(text)


def test_the_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_published_schema_is_the_structs_schema() -> None:
    """The copy shipped in the package and the one in docs/ are what the structs generate now
    (after a change to the structs: ``python -m agenttrace.formats.session.schema_file
    --write``)."""
    generated = schema_text()
    assert published_text() == generated
    assert (ROOT / "docs" / DOCS_COPY).read_text() == generated
    assert SCHEMA["$id"] == SCHEMA_ID == "urn:agenttrace:schema:agenttrace.session:1"
    assert SCHEMA["$defs"]["Label"]["pattern"] == LABEL_PATTERN


def documented_line_kinds() -> dict[str, bool]:
    """docs/events.md's table of what the stream holds: each kind of line and whether it has a
    ``message_id``."""
    text = (ROOT / "docs" / "events.md").read_text()
    table = text.split("## What the stream holds", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| (yes|no) \|", table, flags=re.M)
    return {kind: has_id == "yes" for kind, has_id in rows}


def test_the_documented_line_kinds_are_the_schema_s() -> None:
    kinds = documented_line_kinds()
    mapping = SCHEMA["$defs"]["StreamLine"]["discriminator"]["mapping"]
    assert sorted(kinds) == sorted(mapping)
    assert sorted(k for k, has_id in kinds.items() if has_id) == sorted(
        SCHEMA["$defs"]["Event"]["discriminator"]["mapping"]
    )


@pytest.mark.e2e
def test_a_reader_that_follows_the_seed_reads_the_stream_by_the_documented_rule(
    demo: Demo,
) -> None:
    """Seeds 000/001 read a stream as events that each have a message_id: docs/events.md's rule
    (keep the lines with one, skip the rest) gives exactly the session's events, and every line
    is of a documented kind, with a message_id exactly when the table says so."""
    kinds = documented_line_kinds()
    # The demo has every kind but step_decision (no one decided about a step in doubt).
    assert {line["event_type"] for line in demo.events} == set(kinds) - {"step_decision"}
    for line in demo.events:
        assert ("message_id" in line) is kinds[line["event_type"]], line
    seed_reader = [line for line in demo.events if "message_id" in line]
    assert seed_reader == demo.document["events"]
    assert len(seed_reader) < len(demo.events)
