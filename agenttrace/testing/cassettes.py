"""LLM cassettes: a block's LLM calls and tool calls recorded once, into a session file, and
answered from it afterwards with every socket refused (docs/how-to/cassettes.md).

A cassette is a session file: recording runs the block live in a session of its own and saves
that session's file (checked and redacted: ``agenttrace.testing.cassette_files``); replaying is
``agenttrace.replaying`` of the cassette (strict and offline, or lenient), so calls are matched
by their journal step key and request fingerprint and a stream is given back chunk for chunk,
as any replay does. The record modes are vcrpy's, at the level of LLM and tool calls:

- ``once``: record if the cassette does not exist, else replay strictly, offline;
- ``none``: replay strictly, offline; a missing cassette is an error;
- ``new_episodes``: replay what matches, run the rest live, and save the whole as the cassette;
- ``all``: record, overwriting the cassette.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

import agenttrace
from agenttrace._internal.runtime import runtime
from agenttrace.formats.session.files import SessionFileError, snapshot_path
from agenttrace.model.replay import NotReplayed, ReplayDivergence, ReplayReport
from agenttrace.session.replay import Replay, replaying
from agenttrace.session.state import Session, session_if_any, use_session
from agenttrace.testing.cassette_files import (
    CassetteError,
    anonymous,
    check_recording,
    materialized,
    read_document,
    redacted,
    save,
)

CassetteMode = Literal["once", "none", "new_episodes", "all"]
CASSETTE_MODES: tuple[CassetteMode, ...] = ("once", "none", "new_episodes", "all")
CASSETTE_SUFFIX = ".session.json.gz"
"""A cassette's file name is its name and this (a session file's ``.json.gz``, said so)."""
DEFAULT_DIRECTORY = Path("cassettes")
"""Where a cassette named without a directory lives, relative to the working directory."""

_NAME = re.compile(r"[A-Za-z0-9_.\-\[\]]+")

__all__ = [
    "CASSETTE_MODES",
    "CASSETTE_SUFFIX",
    "Cassette",
    "CassetteError",
    "CassetteMismatch",
    "CassetteMode",
    "UseCassette",
    "cassette_path",
    "use_cassette",
]


class CassetteMismatch(CassetteError):
    """A replay from a cassette met a call the cassette does not answer (``divergence``: the
    replay's :class:`~agenttrace.ReplayDivergence`, if that was why), or a step it had to run
    live (``report``)."""

    def __init__(
        self,
        message: str,
        divergence: ReplayDivergence | None = None,
        report: ReplayReport | None = None,
    ) -> None:
        super().__init__(message)
        self.divergence = divergence
        self.report = report


@dataclass
class Cassette:
    """A cassette in use (``with use_cassette(...) as cassette``)."""

    path: Path
    mode: CassetteMode
    recording: bool
    """The block runs live and is saved at its end (else it is answered from the file)."""
    session: Session
    """The session current inside the block: a new one (recording) or the replay's."""
    replay: Replay | None = None
    """The replay under way, when the block is answered from the file."""

    @property
    def report(self) -> ReplayReport | None:
        """What the replay served and ran live (``None`` when recording)."""
        return self.replay.report if self.replay is not None else None


def cassette_path(
    cassette: str | os.PathLike[str], directory: str | os.PathLike[str] | None
) -> Path:
    """Where the cassette ``cassette`` is: a path (a ``Path``, or text holding a separator or
    ending with ``.json.gz``) as it is, under ``directory`` if relative and given; else a name,
    ``directory/<name>.session.json.gz`` (``directory`` by default ``cassettes``)."""
    api = "agenttrace.testing.use_cassette"
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"{api}: directory must be a path, not {directory!r}")
    base = Path(directory) if directory is not None else None
    if isinstance(cassette, os.PathLike) or (
        isinstance(cassette, str)
        and ("/" in cassette or os.sep in cassette or cassette.endswith(".json.gz"))
    ):
        path = Path(cassette)
        return base / path if base is not None and not path.is_absolute() else path
    if not isinstance(cassette, str):
        raise TypeError(f"{api}: cassette must be a name or a path, not {cassette!r}")
    if not _NAME.fullmatch(cassette) or cassette in (".", ".."):
        raise ValueError(
            f"{api}: cassette name {cassette!r} must be letters, digits and _ . - [ ] only"
        )
    return (base if base is not None else DEFAULT_DIRECTORY) / f"{cassette}{CASSETTE_SUFFIX}"


class UseCassette(contextlib.AbstractContextManager[Cassette]):
    """The context :func:`use_cassette` returns: ``path`` and ``mode`` are known before it is
    entered (``agenttrace.testing.cassette_options.cassette_for`` hands one to a fixture)."""

    def __init__(self, path: Path, mode: CassetteMode, redact: bool | Iterable[str]) -> None:
        self.path = path
        self.mode = mode
        self.redact = redact
        self._block: contextlib.AbstractContextManager[Cassette] | None = None

    def __enter__(self) -> Cassette:
        if self._block is not None:
            raise RuntimeError(f"cassette {self.path} is in use already")
        self._block = _block(self.path, self.mode, self.redact)
        return self._block.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        block, self._block = self._block, None
        assert block is not None, "exited before it was entered"
        return block.__exit__(kind, error, traceback)

    def __repr__(self) -> str:
        return f"use_cassette({str(self.path)!r}, mode={self.mode!r})"


def use_cassette(
    cassette: str | os.PathLike[str],
    mode: CassetteMode = "once",
    *,
    directory: str | os.PathLike[str] | None = None,
    redact: bool | Iterable[str] = True,
) -> UseCassette:
    """Run the block's LLM calls and tool calls from the cassette ``cassette`` (a name, kept as
    ``directory/<name>.session.json.gz``, or a path), or record them into it, by ``mode``:
    ``once`` (record if missing, else replay strictly, offline), ``none`` (replay only),
    ``new_episodes`` (replay what matches, run the rest live, save both) or ``all`` (record,
    overwriting). The block must run decorated runs (``@agenttrace.agent``), one or several,
    which a replay calls again in the same order (the k-th is answered from the k-th recorded);
    ``agenttrace.init`` must have been called to record. ``redact``:
    secrets are replaced when a cassette is saved (the redaction policy: API keys, bearer
    tokens, values under secret-named keys, the secrets agenttrace saw); an iterable of
    strings replaces those values too; ``False`` saves the session as it is. A replay that
    meets a call the cassette does not answer, or starts more or fewer runs than it holds,
    fails with :class:`CassetteMismatch`."""
    api = "agenttrace.testing.use_cassette"
    if mode not in CASSETTE_MODES:
        raise ValueError(f"{api}: mode must be one of {', '.join(CASSETTE_MODES)}, not {mode!r}")
    if isinstance(redact, str) or not isinstance(redact, (bool, Iterable)):
        raise TypeError(f"{api}: redact must be a bool or an iterable of str, not {redact!r}")
    if not isinstance(redact, bool):
        redact = tuple(redact)
    return UseCassette(cassette_path(cassette, directory), mode, redact)


@contextlib.contextmanager
def _block(path: Path, mode: CassetteMode, redact: bool | Iterable[str]) -> Iterator[Cassette]:
    exists = path.is_file()
    if mode == "none" and not exists:
        raise CassetteError(
            f"{path}: no such cassette, and mode 'none' records nothing (record it with mode "
            "'once', --agent-cassette-mode=once)"
        )
    if mode == "all" or not exists:
        with _recording(path, mode, redact) as cassette:
            yield cassette
    else:
        with _replaying(path, mode, redact) as cassette:
            yield cassette


@contextlib.contextmanager
def _recording(path: Path, mode: CassetteMode, redact: bool | Iterable[str]) -> Iterator[Cassette]:
    """The block runs live in a new session, saved as the cassette if the block succeeds (a
    block that raised saves nothing: a half run would be answered from next time)."""
    _check_recording(path, "recording")
    previous = session_if_any()
    session = agenttrace.new_session()
    try:
        yield Cassette(path, mode, True, session)
    finally:
        use_session(previous)
    agenttrace.force_flush()
    written = snapshot_path(runtime.settings.sessions_dir, session.session_id)
    # A block that recorded nothing has no file: refused as a recording of no run.
    document = read_document(written) if written.exists() else {}
    check_recording(document, path)
    anonymous(document)
    save(path, redacted(document, redact))


@contextlib.contextmanager
def _replaying(path: Path, mode: CassetteMode, redact: bool | Iterable[str]) -> Iterator[Cassette]:
    """The block answered from the cassette: strictly and offline (``once``, ``none``), where
    any call it does not answer fails; or leniently (``new_episodes``), saved again with what
    ran live."""
    strict = mode != "new_episodes"
    if not strict:
        _check_recording(path, "new_episodes")
    with contextlib.ExitStack() as stack:
        try:
            replay = stack.enter_context(
                replaying(
                    path, mode="strict" if strict else "lenient", offline=strict, every_run=True
                )
            )
        except (ValueError, SessionFileError) as exc:  # a damaged file, a run that never ended
            raise CassetteError(f"{path}: cannot be replayed: {exc}") from None
        cassette = Cassette(path, mode, False, replay.session, replay)
        try:
            yield cassette
        except ReplayDivergence as divergence:
            raise _mismatch(cassette, divergence) from divergence
        except Exception as exc:
            if strict and not replay.report.clean:  # why it failed: a call run live
                raise _mismatch(cassette) from exc
            raise
        if strict and not replay.report.clean:  # the program caught what it raised
            raise _mismatch(cassette)
        if strict and replay.unused_runs:  # a recorded run the block never started
            raise _unused(cassette, len(replay.runs) - replay.unused_runs)
        unasked = replay.unasked() if strict else []
        if unasked:  # a recorded call the block's runs never made
            raise _unasked(cassette, unasked)
    if not strict:
        agenttrace.force_flush()
        source = read_document(path)
        document = read_document(
            snapshot_path(runtime.settings.sessions_dir, replay.session.session_id)
        )
        materialized(document, source, replay.runs)
        check_recording(document, path)
        anonymous(document)
        save(path, redacted(document, redact))


def _unused(cassette: Cassette, started: int) -> CassetteMismatch:
    """The error of a strict replay from ``cassette`` whose block started only ``started``
    of the runs it holds: the cassette is not the test's."""
    held = len(cassette.replay.runs) if cassette.replay is not None else 0
    return CassetteMismatch(
        f"cassette {cassette.path} (mode {cassette.mode!r}) holds {held} runs and the test "
        f"started {started}: the runs after it were never asked. Record it again with mode "
        "'all' (--agent-cassette-mode=all)",
        report=cassette.report,
    )


def _unasked(cassette: Cassette, unasked: list[NotReplayed]) -> CassetteMismatch:
    """The error of a strict replay from ``cassette`` whose runs made fewer calls than it
    holds: the code changed, and the cassette answers a run it no longer makes."""
    first = unasked[0]
    return CassetteMismatch(
        f"cassette {cassette.path} (mode {cassette.mode!r}) holds {len(unasked)} call(s) the "
        f"test never made, the first {first.kind} {first.name!r} at {first.label}. Record it "
        "again with mode 'all' (--agent-cassette-mode=all)",
        report=cassette.report,
    )


def _check_recording(path: Path, what: str) -> None:
    """Refuse to record with no recorder: the session file the cassette is made of would not
    be written."""
    if runtime.recorder is None or not runtime.settings.journal:
        raise CassetteError(f"{path}: {what} needs agenttrace.init() first, with the journal on")


def _mismatch(cassette: Cassette, divergence: ReplayDivergence | None = None) -> CassetteMismatch:
    """The error of a strict replay from ``cassette`` that met a call it does not answer."""
    report = cassette.report
    if divergence is None and report is not None and report.divergence is not None:
        d = report.divergence
        why = f"replay diverged at {d.label}: {d.kind} {d.name!r}: {d.why}"
    elif divergence is not None:
        why = str(divergence)
    else:
        live = report.live if report is not None else []
        why = "; ".join(f"{n.kind} {n.name!r} at {n.label} ran live: {n.why}" for n in live)
    return CassetteMismatch(
        f"cassette {cassette.path} (mode {cassette.mode!r}) does not answer this run: {why}. "
        "Record it again with mode 'all' (--agent-cassette-mode=all), or add the new calls "
        "with 'new_episodes'",
        divergence,
        report,
    )
