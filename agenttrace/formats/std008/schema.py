"""The STD-008 multi-agent session format as typed structs: what ``agenttrace
validate`` and the STD-008 import accept, and the source of the JSON Schema shipped with the
package (``std008.schema.json``; ``python -m agenttrace.formats.std008.schema --write``
regenerates it and docs/std008.schema.json).

The structs follow STD-008's interfaces (docs/std008.md) field for field: a field without ``?``
there is required here, and its types, enums and ISO 8601 times are checked. STD-008 extends
STD-001's ``AgentSession``, whose other fields (``task_title``, ``agent``, ...) STD-008 does not
list: unknown keys are allowed everywhere, and the few STD-001 fields agenttrace reads are typed
(``session_id``, ``created_at`` and ``tool_calls`` required; ``ToolCall``'s ``call_id`` and
``tool_name``). agenttrace's own additions are optional and marked as such: ``name`` on an
agent, ``sub_session_ids`` on ``subagent_info`` (a call that ran several agents),
``duration_ms`` on a sub-session.

The consistency checks between fields (section 6.2) are in
:mod:`agenttrace.formats.std008.rules`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from importlib import resources
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from agenttrace.formats.session.schema import FormatError, depth_error
from agenttrace.formats.session.schema_file import publish

SCHEMA_RESOURCE = "std008.schema.json"
"""The schema's file name in this package (``agenttrace/formats/std008/``) and in docs/."""
SCHEMA_ID = "urn:agenttrace:schema:std008:1.0"

ISO_TIME_PATTERN = (
    "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
    "(?!\\n)"
)
ID_PATTERN = "^[^\\x00-\\x1f\\x7f-\\x9f]{1,256}(?!\\n)$"
IsoTime = Annotated[
    str,
    Meta(
        pattern=ISO_TIME_PATTERN,
        description="ISO 8601 date and time with its offset: 2026-01-26T10:00:05Z, "
        "2026-01-26T10:00:05.250+01:00.",
    ),
]
Id = Annotated[
    str,
    Meta(pattern=ID_PATTERN, description="An id: printable, 1 to 256 characters."),
]
Count = Annotated[int, Meta(ge=0)]
Milliseconds = Annotated[float, Meta(ge=0, description="A duration in milliseconds.")]
AgentType = Literal["architect", "developer", "reviewer"]
MessageType = Literal[
    "task_assignment",
    "task_progress",
    "task_completion",
    "review_request",
    "review_result",
    "feedback",
    "abort",
    "acknowledgment",
]


class _Object(Struct, kw_only=True, gc=False):
    """A JSON object of the format; keys it does not name are allowed (STD-001's, and what
    later versions add)."""


class AgentIdentifier(_Object, kw_only=True):
    """An agent: its id and type (section 3.1)."""

    agent_id: Id
    agent_type: AgentType
    instance_id: str | UnsetType = UNSET
    name: Annotated[
        str | UnsetType, Meta(description="agenttrace's addition: the agent's name.")
    ] = UNSET


class Collaboration(_Object, kw_only=True):
    """Who works together, and how (section 3.1; ``mode: "single"``: section 8.1)."""

    mode: Literal["multi_agent", "single"]
    pattern: Literal["master_worker", "peer_to_peer", "pipeline"]
    orchestrator: AgentIdentifier
    participants: list[AgentIdentifier]


class SubagentInfo(_Object, kw_only=True):
    """On a call that ran a sub-agent: the sub-session it links to (section 4.1)."""

    subagent_type: str | UnsetType = UNSET
    sub_session_id: Id | UnsetType = UNSET
    sub_session_ids: Annotated[
        list[Id] | UnsetType,
        Meta(
            description="agenttrace's addition: every sub-session of a call that ran several "
            "agents (sub_session_id is the first)."
        ),
    ] = UNSET
    tool_uses: Count | UnsetType = UNSET
    tokens_used: Count | UnsetType = UNSET


class ToolInput(_Object, kw_only=True):
    """A call's input."""

    params: dict[str, Any] | UnsetType = UNSET


class ToolOutput(_Object, kw_only=True):
    """A call's output."""

    status: str | UnsetType = UNSET
    error: str | UnsetType = UNSET


class ToolCall(_Object, kw_only=True):
    """One tool call (STD-001's ``ToolCall``, as far as STD-008 shows it)."""

    call_id: Id
    tool_name: Annotated[str, Meta(min_length=1)]
    tool_category: str | UnsetType = UNSET
    started_at: IsoTime | UnsetType = UNSET
    ended_at: IsoTime | UnsetType = UNSET
    duration_ms: Milliseconds | UnsetType = UNSET
    input: ToolInput | UnsetType = UNSET
    output: ToolOutput | UnsetType = UNSET
    subagent_info: SubagentInfo | UnsetType = UNSET


class Task(_Object, kw_only=True):
    """A task given to a sub-agent (section 3.2)."""

    task_id: Id
    description: str
    priority: Literal["high", "medium", "low"]


class FileChange(_Object, kw_only=True):
    """A file a developer created or changed (section 3.4)."""

    path: str
    lines_added: Count | UnsetType = UNSET
    lines_removed: Count | UnsetType = UNSET
    description: str | UnsetType = UNSET


class Changes(_Object, kw_only=True):
    """What a developer changed."""

    files_created: list[FileChange]
    files_modified: list[FileChange]
    files_deleted: list[str]


class SelfReview(_Object, kw_only=True):
    """A developer's own checks."""

    tests_run: bool
    tests_passed: bool
    type_check_passed: bool


class DeveloperOutput(_Object, kw_only=True):
    """What a developer sub-agent produced (section 3.4)."""

    task_id: Id
    status: Literal["completed", "partial", "failed"]
    changes: Changes
    summary: str
    implementation_notes: str | UnsetType = UNSET
    self_review: SelfReview | UnsetType = UNSET
    blockers: list[str] | UnsetType = UNSET


class ReviewFinding(_Object, kw_only=True):
    """One finding of a review (section 3.5)."""

    finding_id: Id
    severity: Literal["critical", "major", "minor", "suggestion"]
    category: Literal["bug", "security", "performance", "style", "logic"]
    file: str
    line: Count | UnsetType = UNSET
    description: str
    suggestion: str | UnsetType = UNSET


class Verification(_Object, kw_only=True):
    """What a reviewer checked."""

    tests_passed: bool
    type_check_passed: bool
    custom_checks: dict[str, bool] | UnsetType = UNSET


class RequiredChange(_Object, kw_only=True):
    """A change a reviewer requires."""

    change_id: Id
    priority: Literal["must_fix", "should_fix", "consider"]
    related_findings: list[str]
    description: str


class ReviewerOutput(_Object, kw_only=True):
    """What a reviewer sub-agent produced (section 3.5)."""

    review_id: Id
    task_id: Id
    verdict: Literal["approved", "changes_requested", "rejected"]
    findings: list[ReviewFinding]
    verification: Verification
    summary: str
    required_changes: list[RequiredChange] | UnsetType = UNSET


class SubAgentSession(_Object, kw_only=True):
    """A sub-agent's run (section 3.2). ``output`` is a ``ReviewerOutput`` when it has a
    ``verdict``, else a ``DeveloperOutput``."""

    sub_session_id: Id
    parent_session_id: Id
    agent: AgentIdentifier
    triggered_by_call_id: str
    task: Task
    started_at: IsoTime
    completed_at: IsoTime | UnsetType = UNSET
    status: str
    duration_ms: Annotated[
        Milliseconds | UnsetType,
        Meta(description="agenttrace's addition: how long the sub-agent ran."),
    ] = UNSET
    tool_calls: list[ToolCall]
    output: Annotated[
        dict[str, Any] | UnsetType,
        Meta(
            extra_json_schema={
                "anyOf": [
                    {"$ref": "#/$defs/DeveloperOutput"},
                    {"$ref": "#/$defs/ReviewerOutput"},
                ]
            }
        ),
    ] = UNSET

    def __post_init__(self) -> None:
        if self.output is UNSET:
            return
        kind = ReviewerOutput if "verdict" in self.output else DeveloperOutput
        try:
            msgspec.convert(self.output, kind)
        except msgspec.ValidationError as exc:
            error = FormatError.of(exc, "output")
            raise ValueError(f"{error.where}: {error.what} (a {kind.__name__})") from None


class AgentMessage(_Object, kw_only=True):
    """A message between agents (section 3.3)."""

    message_id: Id
    timestamp: IsoTime
    sequence_number: Count
    from_agent: AgentIdentifier
    to_agent: AgentIdentifier
    message_type: MessageType
    payload: Any
    correlation_id: str | UnsetType = UNSET
    reply_to: str | UnsetType = UNSET


class AgentSummary(_Object, kw_only=True):
    """One agent's figures (section 3.6)."""

    agent_id: Id
    agent_type: str
    tool_calls_count: Count
    duration_ms: Milliseconds
    status: Literal["completed", "failed", "in_progress"]


class AgentSummaries(_Object, kw_only=True):
    """Figures per agent: the orchestrator, the developers, the reviewer."""

    architect: AgentSummary
    developers: list[AgentSummary]
    reviewer: AgentSummary | UnsetType = UNSET


class TaskTotals(_Object, kw_only=True):
    """How many tasks, done and failed."""

    total: Count
    completed: Count
    failed: Count


class Summary(_Object, kw_only=True):
    """STD-001's ``SessionSummary`` (as far as STD-008 shows it) extended by section 3.6;
    ``agents``, ``tasks`` and ``review_iterations`` are required in a multi-agent session."""

    total_duration_ms: Milliseconds | UnsetType = UNSET
    tool_calls_count: Count | UnsetType = UNSET
    files_created: list[str] | UnsetType = UNSET
    files_modified: list[str] | UnsetType = UNSET
    agents: AgentSummaries | UnsetType = UNSET
    tasks: TaskTotals | UnsetType = UNSET
    review_iterations: Count | UnsetType = UNSET
    final_verdict: Literal["approved", "rejected"] | UnsetType = UNSET


_MULTI_AGENT_FIELDS = ("sub_sessions", "messages", "summary")
_MULTI_AGENT_SUMMARY = ("agents", "tasks", "review_iterations")


class MultiAgentSession(_Object, kw_only=True):
    """A STD-008 document: a multi-agent session, or (``collaboration.mode: "single"``, or no
    ``collaboration`` at all) a single-agent one (sections 3.1, 6.1 and 8)."""

    session_id: Id
    task_title: str | UnsetType = UNSET
    user_prompt: str | UnsetType = UNSET
    created_at: IsoTime
    completed_at: IsoTime | UnsetType = UNSET
    status: str | UnsetType = UNSET
    collaboration: Collaboration | UnsetType = UNSET
    tool_calls: list[ToolCall]
    sub_sessions: list[SubAgentSession] | UnsetType = UNSET
    messages: list[AgentMessage] | UnsetType = UNSET
    summary: Summary | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.collaboration is UNSET or self.collaboration.mode != "multi_agent":
            return
        for key in _MULTI_AGENT_FIELDS:
            if getattr(self, key) is UNSET:
                raise ValueError(f"Object missing required field `{key}` (a multi_agent session)")
        assert not isinstance(self.summary, UnsetType)
        for key in _MULTI_AGENT_SUMMARY:
            if getattr(self.summary, key) is UNSET:
                raise ValueError(
                    f"Object missing required field `summary.{key}` (a multi_agent session)"
                )

    json_schema_extra = {
        "if": {
            "required": ["collaboration"],
            "properties": {"collaboration": {"properties": {"mode": {"const": "multi_agent"}}}},
        },
        "then": {
            "required": list(_MULTI_AGENT_FIELDS),
            "properties": {"summary": {"required": list(_MULTI_AGENT_SUMMARY)}},
        },
    }


# --- checking ------------------------------------------------------------------------------------


def check(document: Any, max_depth: int) -> FormatError | None:
    """The first way ``document`` (decoded JSON) is not of the format, or None: nested at most
    ``max_depth`` levels, and a :class:`MultiAgentSession` (:class:`FormatError`'s ``where``
    is a JSON path such as ``$.sub_sessions[0].task``)."""
    problem = depth_error(document, max_depth)
    if problem is not None:
        return problem
    try:
        msgspec.convert(document, MultiAgentSession)
    except msgspec.ValidationError as exc:
        error = FormatError.of(exc)
    except UnicodeEncodeError:  # a lone surrogate where a pattern applies
        return FormatError("$", "text that is not Unicode (a lone surrogate) in an id or time")
    else:
        return None
    what, where = error.what, error.where
    for pattern, form in _FORMS.items():
        what = what.replace(f"`str` matching regex {pattern!r}", form)
    if what.startswith("output"):  # from SubAgentSession.__post_init__: "output.x: what"
        path, _, what = what.partition(": ")
        where = f"{where}.{path}"
    return FormatError(where, what)


_FORMS = {
    ISO_TIME_PATTERN: "an ISO 8601 time with its offset (2026-01-26T10:00:05Z)",
    ID_PATTERN: "an id (printable, 1 to 256 characters)",
}
"""msgspec names a pattern a string failed by the pattern itself; a reader wants its name."""


# --- the published schema ----------------------------------------------------------------------


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a STD-008 document, from the structs."""
    (document, *_), components = msgspec.json.schema_components(
        [MultiAgentSession, DeveloperOutput, ReviewerOutput], ref_template="#/$defs/{name}"
    )
    extra = MultiAgentSession.json_schema_extra
    components["MultiAgentSession"].update(extra)
    for definition in components.values():
        if isinstance(definition.get("description"), str):
            definition["description"] = " ".join(definition["description"].split()).replace(
                "``", "`"
            )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "STD-008 multi-agent session, as agenttrace reads and writes it",
        "description": (
            "A multi-agent session document (STD-008 v1.0): collaboration, tool calls, "
            "sub-sessions, messages and summary; unknown keys are allowed (STD-001's fields). "
            "Generated from agenttrace/formats/std008/schema.py; the consistency checks of the "
            "STD-008's section 6.2 are not expressible here (agenttrace validate applies them)."
        ),
        **document,
        "$defs": dict(sorted(components.items())),
    }


def schema_text() -> str:
    """:func:`json_schema` as the published file's text."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def published_text() -> str:
    """The text of the schema shipped with the package."""
    return resources.files("agenttrace.formats.std008").joinpath(SCHEMA_RESOURCE).read_text("utf-8")


def main(argv: Sequence[str]) -> int:
    """Print the schema; with ``--write``, regenerate the package's copy and, in a source
    checkout, the one in docs/."""
    return publish(schema_text(), argv, __file__, SCHEMA_RESOURCE, SCHEMA_RESOURCE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
