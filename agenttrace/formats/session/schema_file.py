"""The published JSON Schema of session files and event streams, generated from the structs of
:mod:`agenttrace.formats.session.schema` and shipped with the package.

``python -m agenttrace.formats.session.schema_file`` prints it; ``--write`` regenerates the
package's copy (:data:`~agenttrace.formats.session.schema.SCHEMA_RESOURCE`) and, in a source
checkout, docs/session-file.schema.json. The test suite checks that both equal :func:`json_schema`,
so a change to the structs cannot leave the published schema behind.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from agenttrace.formats.session import schema
from agenttrace.formats.session.schema import FORMAT, SCHEMA_ID, SCHEMA_RESOURCE, VERSION
from agenttrace.model import constrained

DOCS_COPY = "session-file.schema.json"
"""The copy in the repository's docs/ directory, beside docs/session-file.md."""

_EVENT_DESCRIPTION = "A canonical event (docs/events.md): one line of an event stream."
_LINE_DESCRIPTION = (
    "One line of an event stream (docs/events.md, What the stream holds): a canonical event "
    "(the lines with a message_id), an op_accounted line, or a line of the step journal (step, "
    "step_decision)."
)

_INGRESS_VALUE = {
    "description": "A value in an ingress block: a string, boolean or number, or an object of "
    "them, nested.",
    "anyOf": [
        {"type": ["string", "boolean", "number"]},
        {"type": "object", "additionalProperties": {"$ref": "#/$defs/IngressValue"}},
    ],
}

_NAMED_VALUES: dict[str, Any] = {
    "SessionId": schema.SessionId,
    "TxnId": schema.TxnId,
    "TraceId": schema.TraceId,
    "SpanId": schema.SpanId,
    "Label": constrained.Label,
    "MessageId": schema.MessageId,
    "AgentId": constrained.AgentId,
    "EpochMs": schema.EpochMs,
    "EpochNs": schema.EpochNs,
    "Timestamp": constrained.Timestamp,
    "AttributeValue": schema.AttributeValue,
    "Ingress": schema.Ingress,
}
"""Constrained values that get a definition of their own (msgspec writes them out in full at
every use); where two are written alike, the first listed names both."""


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the session file, generated from the structs:
    ``$defs/StreamLine`` is the schema of one line of an event stream, and
    ``$defs/AccountingEntry`` that of one line of the billing ledger."""
    (document, event, line), components = msgspec.json.schema_components(
        [schema.SessionFile, schema.Event, schema.StreamLine], ref_template="#/$defs/{name}"
    )
    for cls in _structs():
        definition = components.get(cls.__name__)
        if definition is not None:
            definition.update(_rules(cls))
    components["Event"] = {"description": _EVENT_DESCRIPTION, **event}
    components["StreamLine"] = {"description": _LINE_DESCRIPTION, **line}
    components = _shared(components)
    components["IngressValue"] = _INGRESS_VALUE
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"agenttrace session file, format {FORMAT} version {VERSION}",
        "description": (
            "The JSON document inside <session_id>.json.gz, as agenttrace writes and reads it "
            "(docs/session-file.md). $defs/StreamLine is the schema of one line of "
            "<session_id>.events.jsonl (docs/events.md: a canonical event, $defs/Event, an op's "
            "accounting, $defs/OpAccounted, or the step journal, $defs/Step and "
            "$defs/StepDecision), $defs/AccountingEntry that of one line of the billing "
            "ledger. Generated from agenttrace/formats/session/schema.py."
        ),
        **document,
        "$defs": dict(sorted(components.items())),
    }


def _rules(cls: type) -> dict[str, Any]:
    """The rules a struct checks in ``__post_init__``, as JSON Schema keywords."""
    keywords: dict[str, Any] = {}
    requires = getattr(cls, "requires", None)
    if requires:
        keywords["dependentRequired"] = {key: list(keys) for key, keys in requires.items()}
    excludes = getattr(cls, "excludes", None)
    if excludes:
        pairs = [[key, other] for key, others in excludes.items() for other in others]
        keywords["not"] = {"anyOf": [{"required": pair} for pair in pairs]}
    keywords.update(getattr(cls, "json_schema_extra", {}))
    return keywords


def _structs() -> list[type]:
    found: list[type] = []
    pending: list[type] = [msgspec.Struct]
    while pending:
        subclasses: list[type] = pending.pop().__subclasses__()
        for sub in subclasses:
            if sub.__module__ == schema.__name__:
                found.append(sub)
            pending.append(sub)
    return found


def _shared(components: dict[str, Any]) -> dict[str, Any]:
    """``components`` with each use of a named value (``Label``, ``EpochMs``, ...) made a
    ``$ref`` to its definition, and descriptions (docstrings) as one line of Markdown."""
    named = {name: msgspec.json.schema(value) for name, value in _NAMED_VALUES.items()}
    exact = {_key(value, True): name for name, value in reversed(named.items())}
    loose = {_key(value, False): name for name, value in reversed(named.items())}

    def visit(node: Any) -> Any:
        if isinstance(node, list):
            return [visit(item) for item in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("description"), str):  # a docstring: one line, plain backquotes
            text = " ".join(node["description"].split()).replace("``", "`")
            node = {**node, "description": text}
        name = exact.get(_key(node, True)) or loose.get(_key(node, False))
        if name is None:
            return {key: visit(value) for key, value in node.items()}
        ref: dict[str, Any] = {"$ref": f"#/$defs/{name}"}
        if "description" in node and node["description"] != named[name].get("description"):
            ref["description"] = node["description"]
        return ref

    shared = {name: visit(definition) for name, definition in components.items()}
    shared.update(named)
    return shared


def _key(node: dict[str, Any], with_description: bool) -> str:
    if not with_description:
        node = {key: value for key, value in node.items() if key != "description"}
    return json.dumps(node, sort_keys=True)


def schema_text() -> str:
    """:func:`json_schema` as the published file's text."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def published_text() -> str:
    """The text of the schema shipped with the package."""
    return (
        resources.files("agenttrace.formats.session").joinpath(SCHEMA_RESOURCE).read_text("utf-8")
    )


def published_schema() -> dict[str, Any]:
    """The schema shipped with the package (what :func:`json_schema` gives)."""
    result: dict[str, Any] = json.loads(published_text())
    return result


def publish(text: str, argv: Sequence[str], module: str, resource: str, docs_copy: str) -> int:
    """A schema generator's command line: print ``text``; with ``--write``, write it as the
    package's ``resource`` (next to ``module``, the generator's ``__file__``) and, in a source
    checkout, as ``docs/{docs_copy}``."""
    if "--write" not in argv:
        sys.stdout.write(text)
        return 0
    here = Path(module).resolve().parent
    targets = [here / resource]
    package = next(folder for folder in here.parents if folder.name == "agenttrace")
    docs = package.parent / "docs"
    if docs.is_dir():
        targets.append(docs / docs_copy)
    for target in targets:
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    return 0


def main(argv: Sequence[str]) -> int:
    """Print the schema; with ``--write``, regenerate the package's copy and, in a source
    checkout, the one in docs/."""
    return publish(schema_text(), argv, __file__, SCHEMA_RESOURCE, DOCS_COPY)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
