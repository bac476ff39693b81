"""Constrained values the session file and the step journal share (docs/session-file.md,
docs/journal.md): path labels, agent ids, times and fingerprints, each a type whose constraint
msgspec checks when a line or a file is read, and which the published JSON Schema states.

They live in the domain because the journal's line types (:mod:`agenttrace.model.journal_lines`)
are defined with them, and the session file's schema (``agenttrace.formats.session.schema``)
builds on both."""

from __future__ import annotations

import re
from typing import Annotated, Any

from msgspec import Meta


def whole(body: str) -> str:
    """A pattern matching the whole string. Python's ``$`` also matches before a final newline;
    ``(?!\\n)`` refuses that (and is a no-op in JSON Schema's ECMA-262 dialect)."""
    return f"^{body}$(?!\\n)"


LABEL_PATTERN = whole(
    "(0|[1-9][0-9]*(\\.[1-9][0-9]*(:([2-9]|[1-9][0-9]+))?\\.[1-9][0-9]*)*"
    "(\\.[1-9][0-9]*(:[1-9][0-9]*)?)?)"
)
Label = Annotated[
    str,
    Meta(
        pattern=LABEL_PATTERN,
        max_length=1024,
        description="A path label (docs/path-labels.md): 0 for a run's root, k for a turn, k.j "
        "for an op, k.j:n for the n-th sub-agent run hosted by op k.j, and so on to any depth.",
    ),
]
STEP_LABEL_PATTERN = LABEL_PATTERN.replace(")$", ")(/([2-9]|[1-9][0-9]+)|~[1-9][0-9]*)?$", 1)
StepLabel = Annotated[
    str,
    Meta(
        pattern=STEP_LABEL_PATTERN,
        max_length=1024,
        description="A step's place in the journal (docs/journal.md): its op's path label, and "
        "/n (n from 2) for the n-th request a re-entry made there that was not the journal's, "
        "or ~n for the n-th value read there inside agenttrace.deterministic().",
    ),
]
AGENT_ID_PATTERN = whole("[^\\x00-\\x1f\\x7f-\\x9f]{1,256}")
AgentId = Annotated[
    str,
    Meta(
        # Chosen by agenttrace (agent_001) or by the application: any printable text.
        pattern=AGENT_ID_PATTERN,
        description="agent_001, agent_002, ... (or an id the application gave): printable, at "
        "most 256 characters.",
    ),
]
TIMESTAMP_PATTERN = whole(
    "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\\.[0-9]{3}Z"
)
Timestamp = Annotated[
    str,
    Meta(
        pattern=TIMESTAMP_PATTERN,
        description="When it was logged: ISO-8601 UTC with milliseconds.",
    ),
]
FINGERPRINT_PATTERN = "^sha256:[0-9a-f]{64}$"
"""A step's fingerprint: ``sha256:`` and the hex digest of its request (docs/journal.md)."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(value: Any) -> Any:
    """Decoded JSON with each lone surrogate (text with no UTF-8, which agenttrace writes as its
    JSON escape) as U+FFFD: msgspec's pattern checks raise ``UnicodeEncodeError`` on one, and
    U+FFFD is allowed by no id or label pattern and by any free text, so the copy is refused
    exactly where the original breaks a pattern."""
    if type(value) is str:
        return _SURROGATE.sub("\ufffd", value)
    if type(value) is list:
        return [without_surrogates(item) for item in value]
    if type(value) is dict:
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value
