"""A cassette's file: a session file (one gzipped JSON document) saved where a test keeps it,
checked and redacted on the way (docs/how-to/cassettes.md).

Four things are done to a session's document before it becomes a cassette: a recording that
could not be answered from is refused (no decorated run; a stream that delivered no chunk; a
reply too long for the journal to keep); the recording machine's process details are left out
(:func:`anonymous`: a cassette is checked into a repository); secrets are replaced by the
redaction policy
(``agenttrace._internal.redact``, the one the spans and ``redacted_save`` use) and by the
values the caller names; and a replay session's ``replayed`` lines (which point at the source's
recording) are replaced by the source's own lines, so the cassette answers alone.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.redact import REDACTED, scrub_json_text
from agenttrace.formats.session.files import write_atomically
from agenttrace.model.journal_lines import RUN_LABEL


class CassetteError(Exception):
    """A cassette that cannot be used or saved; the message says which and why, in one line."""


def read_document(path: Path) -> dict[str, Any]:
    """The JSON document of the session file (or cassette) at ``path``."""
    try:
        document = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError, EOFError) as exc:
        raise CassetteError(f"{path}: not a readable session file ({exc})") from None
    if not isinstance(document, dict):
        raise CassetteError(f"{path}: not a session file (its document is not an object)")
    return document


def journal_lines(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The document's step-journal lines (steps and decisions), as dicts."""
    lines = document.get("journal") or []
    return [line for line in lines if isinstance(line, dict)]


def check_recording(document: Mapping[str, Any], cassette: Path) -> None:
    """Refuse a recording a replay could not answer from (:class:`CassetteError`): no
    decorated run ended in it (a replay calls runs again), LLM calls outside any run, or an LLM
    attempt whose reply the journal holds as a stream of no chunk (an empty body: a replay
    would give back nothing where the live call gave something, or hide that the provider sent
    nothing) or did not keep (``capped``)."""
    lines = journal_lines(document)
    runs = [line for line in lines if line.get("kind") == "run" and line.get("step") == RUN_LABEL]
    if any(line.get("implicit") for line in runs):
        raise CassetteError(
            f"{cassette}: not saved: the block made LLM calls outside any decorated run, which "
            "a replay cannot answer (call them from an @agenttrace.agent function)"
        )
    ended = [line for line in runs if line.get("state") == "done"]
    if not ended:
        raise CassetteError(
            f"{cassette}: not saved: the block ran no decorated run to record (call an "
            "@agenttrace.agent function, or a function under agenttrace.run, inside it)"
        )
    for line in lines:
        if line.get("kind") != "llm" or line.get("state") != "done":
            continue
        where = f"{cassette}: not saved: the LLM attempt {line.get('name')!r} at {line.get('step')}"
        if "chunks" in line and not any(_delivers(chunk) for chunk in line["chunks"] or []):
            raise CassetteError(f"{where} streamed no chunk (an empty body is never recorded)")
        if line.get("capped"):
            raise CassetteError(f"{where} was too long for the journal to keep")


def _delivers(chunk: Any) -> bool:
    """Whether a recorded stream chunk delivered something: a chat chunk (litellm's, the
    OpenAI SDK's) with content, a tool call, reasoning or usage. litellm ends a stream whose
    provider sent nothing with a chunk it makes, all empty but its ``finish_reason``: that one
    delivers nothing. Another API's events are not judged (taken as delivering)."""
    if not isinstance(chunk, Mapping) or "choices" not in chunk:
        return True
    if chunk.get("usage"):
        return True
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, Mapping) else None
        if isinstance(delta, Mapping) and any(
            value not in (None, "", [], {}) for key, value in delta.items() if key != "role"
        ):
            return True
    return False


def materialized(
    document: dict[str, Any], source: Mapping[str, Any], origins: Sequence[str]
) -> None:
    """Make a replay session's ``document`` answer alone: each ``replayed`` line of a step of
    the k-th decorated run it started becomes that step's recorded lines in the source run
    ``origins[k]`` (in the ``source`` document), under the replay run's key; the replay's
    ``meta.replay_of`` goes (its source is this file, overwritten)."""
    recorded: dict[tuple[Any, Any, Any], list[dict[str, Any]]] = {}
    for line in journal_lines(source):
        if line.get("run") not in origins or line.get("state") == "replayed":
            continue
        if line.get("event_type") != "step":
            continue
        key = (line.get("run"), line.get("step"), line.get("attempt"))
        recorded.setdefault(key, []).append(line)
    replayed = dict(zip(_decorated_runs(document), origins, strict=False))
    lines: list[dict[str, Any]] = []
    for line in journal_lines(document):
        origin = replayed.get(line.get("run"))
        served = recorded.get((origin, line.get("step"), line.get("attempt")))
        if line.get("state") == "replayed" and served:
            lines += [{**step, "run": line.get("run")} for step in served]
        else:
            lines.append(line)
    document["journal"] = lines
    meta = document.get("meta")
    if isinstance(meta, dict):
        meta.pop("replay_of", None)


def _decorated_runs(document: Mapping[str, Any]) -> list[Any]:
    """The journal key of each decorated run of ``document``, in the order they started."""
    runs: dict[Any, None] = {}
    for line in journal_lines(document):
        run = line.get("kind") == "run" and line.get("step") == RUN_LABEL
        if run and not line.get("implicit"):
            runs.setdefault(line.get("run"))
    return list(runs)


LOCAL_DETAILS: tuple[str, ...] = ("pid", "argv0", "cwd")
"""The details of a run's ``cli`` ingress (``agenttrace.tracing.scopes.default_ingress``) that
say where it was recorded: the process id, the program's path, the working directory."""
LOCAL_RESOURCE_PREFIXES: tuple[str, ...] = ("host.", "process.")
"""OpenTelemetry resource attributes that describe the recording machine (host name, process
command line, owner...), which a resource detector may have added."""
_LOCAL_ATTRIBUTES = frozenset(f"{sc.INGRESS_PREFIX}cli.{name}" for name in LOCAL_DETAILS)


def anonymous(document: dict[str, Any]) -> None:
    """Leave out of ``document`` what says on which machine, in which directory and process
    it was recorded: the ``cli`` ingress's pid, program path and working directory (in the
    session's meta, on each run and as its span's flattened attributes), the pid on the
    journal's run lines and the resource's ``host.*`` and ``process.*`` attributes. None of
    them is read by a replay, and a view of an ended run does not ask whether its process
    still runs; the ingress keeps its ``source``."""
    pending: list[Any] = [document]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending += node
            continue
        if not isinstance(node, dict):
            continue
        ingress = node.get("ingress")
        cli = ingress.get("cli") if isinstance(ingress, dict) else None
        if isinstance(ingress, dict) and isinstance(cli, dict):
            for name in LOCAL_DETAILS:
                cli.pop(name, None)
            if not cli:
                del ingress["cli"]
        for key in [key for key in node if key in _LOCAL_ATTRIBUTES]:
            del node[key]
        resource = node.get("resource")
        values = resource.get("attributes") if isinstance(resource, dict) else None
        if isinstance(values, dict):
            for key in [key for key in values if str(key).startswith(LOCAL_RESOURCE_PREFIXES)]:
                del values[key]
        pending += node.values()
    for line in journal_lines(document):
        line.pop("pid", None)  # a run line's: its process's id


def redacted(document: Mapping[str, Any], redact: bool | Iterable[str]) -> bytes:
    """``document`` as a cassette's bytes: the redaction policy applied to its text (unless
    ``redact`` is false), and each value ``redact`` names (an iterable of strings) replaced
    too; gzipped with no time in its header, so one recording makes the same bytes."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    if redact is not False:
        text = scrub_json_text(text)
    if not isinstance(redact, bool):
        for value in redact:
            if not isinstance(value, str) or not value:
                raise TypeError(f"redact: the values to replace must be non-empty str: {value!r}")
            # As the document's JSON text has it (quotes and backslashes escaped, once or twice
            # for JSON inside a string).
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]
            twice = json.dumps(escaped, ensure_ascii=False)[1:-1]
            for form in dict.fromkeys((twice, escaped, value)):
                text = text.replace(form, REDACTED)
    try:
        json.loads(text)
    except ValueError as exc:  # never a cassette that does not read back
        raise CassetteError(f"redacting made the document unreadable ({exc})") from None
    return gzip.compress(text.encode(), mtime=0)


def save(path: Path, data: bytes) -> None:
    """Write a cassette's bytes to ``path`` (its directories made), atomically."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, data)
    except OSError as exc:
        raise CassetteError(f"{path}: cannot be written ({exc})") from None
