"""A session store in PostgreSQL (``postgresql://user:password@host:port/dbname``), through
psycopg 3 (the ``postgres`` extra).

Two tables, created if absent in the first schema of the connection's ``search_path``
(``public`` unless the URL says otherwise, e.g. ``?options=-csearch_path%3Dtraces``)::

    agenttrace_segments   (session_id, name) primary key, size, data bytea
    agenttrace_manifests  session_id primary key, version bigint, data bytea

The names carry a prefix rather than needing a schema of their own: the store can live in a
database other applications use, with a role that may create tables but not schemas; several
stores share one database each in a schema of its own, chosen by the standard libpq
``options`` parameter, with nothing of ours to parse in the URL.

The store's promises are the engine's: ``append`` is an ``INSERT ... ON CONFLICT DO NOTHING``
on the primary key (no row inserted: someone created the segment first), a manifest swap an
``UPDATE ... WHERE version = expected`` (or, for the first manifest, an insert that does
nothing on conflict). Under READ COMMITTED a swapper waiting on another's row lock re-checks
the version once that one commits, so of racers from one version exactly one updates a row.

One connection per store object, in autocommit (each operation is one statement, its own
transaction), shared by the process's threads under a lock; a connection found broken is
opened again by the next operation. A segment's ``size`` column is checked (against
``octet_length(data)`` by a constraint) before its bytes are sent, so a bounded read never
fetches a segment over its limit.
"""

from __future__ import annotations

import re
import threading
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from agenttrace._internal.extras import install_hint
from agenttrace.formats.session.files import SessionFileError
from agenttrace.formats.stores.base import (
    MANIFEST_BYTES,
    Manifest,
    ManifestConflict,
    SegmentExists,
    SegmentInfo,
    SegmentTooLarge,
    StoreError,
    check_segment_name,
    check_session_id,
)

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT = 5
"""Seconds to wait for a server (per host) when the URL names no ``connect_timeout``: a store
that cannot be reached fails an ``open_store`` quickly instead of hanging an agent's start."""

_MESSAGE_CHARS = 300

# One constant key for the transaction that creates the tables: two processes opening a new
# store at once would otherwise both run CREATE TABLE IF NOT EXISTS, and the loser fails on the
# catalog's unique index (IF NOT EXISTS checks before it inserts, not atomically).
_CREATE_TABLES = (
    "SELECT pg_advisory_xact_lock(hashtext('agenttrace.formats.stores.postgres'))",
    "CREATE TABLE IF NOT EXISTS agenttrace_segments ("
    " session_id text NOT NULL,"
    " name text NOT NULL,"
    " size bigint NOT NULL,"
    " data bytea NOT NULL,"
    " PRIMARY KEY (session_id, name),"
    " CHECK (size = octet_length(data)))",
    "CREATE TABLE IF NOT EXISTS agenttrace_manifests ("
    " session_id text PRIMARY KEY,"
    " version bigint NOT NULL,"
    " data bytea NOT NULL)",
)
# Looked up first so a role that may only read and write the tables (no CREATE on the schema)
# opens a store someone else created.
_TABLES_EXIST = (
    "SELECT to_regclass('agenttrace_segments') IS NOT NULL"
    " AND to_regclass('agenttrace_manifests') IS NOT NULL"
)
_APPEND = (
    "INSERT INTO agenttrace_segments (session_id, name, size, data) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (session_id, name) DO NOTHING"
)
_SEGMENTS = "SELECT name, size FROM agenttrace_segments WHERE session_id = %s"
_READ = (
    "SELECT size, CASE WHEN size <= %s THEN data END FROM agenttrace_segments"
    " WHERE session_id = %s AND name = %s"
)
_MANIFEST = (
    "SELECT version, octet_length(data), CASE WHEN octet_length(data) <= %s THEN data END"
    " FROM agenttrace_manifests WHERE session_id = %s"
)
_FIRST_MANIFEST = (
    "INSERT INTO agenttrace_manifests (session_id, version, data) VALUES (%s, 1, %s)"
    " ON CONFLICT (session_id) DO NOTHING RETURNING version"
)
_SWAP_MANIFEST = (
    "UPDATE agenttrace_manifests SET data = %s, version = version + 1"
    " WHERE session_id = %s AND version = %s RETURNING version"
)
_SESSIONS = (
    "SELECT session_id FROM agenttrace_segments UNION SELECT session_id FROM agenttrace_manifests"
)


def _import_psycopg() -> ModuleType:
    try:
        return import_module("psycopg")
    except ImportError:  # absent, or present with no libpq wrapper it can load
        raise StoreError(
            f"a postgresql:// store needs psycopg 3: {install_hint('postgres')}"
        ) from None


def _is_secret(key: str) -> bool:
    return "password" in key.lower()  # password, sslpassword


def public_url(url: str) -> str:
    """``url`` with no password in it (neither ``user:password@`` nor a ``password=``
    parameter): what messages and listings show."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed [ of an IPv6 address
        raise StoreError("not a store URL: a postgresql:// URL that cannot be parsed") from None
    userinfo, at, hosts = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}@{hosts}" if at else hosts
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if not _is_secret(k)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _secrets(url: str) -> re.Pattern[str] | None:
    """A pattern of the password-like strings of ``url``, as written and decoded, so a message
    can be scrubbed of them whatever the library echoed (libpq quotes a token it cannot parse).
    Only where no letter or digit touches them: a password ``p`` must not eat every "p"."""
    parts = urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    found = [userinfo.partition(":")[2]] if at else []
    found += [v for k, v in parse_qsl(parts.query) if _is_secret(k)]
    found += [unquote(secret) for secret in found]
    secrets = sorted({secret for secret in found if secret}, key=len, reverse=True)
    if not secrets:
        return None
    either = "|".join(re.escape(secret) for secret in secrets)
    return re.compile(f"(?<![A-Za-z0-9])(?:{either})(?![A-Za-z0-9])")


class PostgresStore:
    """Sessions in two PostgreSQL tables; see the module docstring for the tables and how they
    keep the store's promises. Connects (and creates the tables if absent) when made, so a store
    that cannot be reached is a :class:`StoreError` at once."""

    def __init__(self, url: str) -> None:
        self.url = public_url(url)
        self._conninfo = url
        self._secrets = _secrets(url)
        self._psycopg = _import_psycopg()
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[Any] | None = None
        self._closed = False
        with self._lock:
            self._connect("connect")

    def _error(self, what: str, error: Exception) -> StoreError:
        """A one-line :class:`StoreError` naming the store, with no secret in it."""
        # The server's primary message only: its DETAIL may quote a row, a session's bytes.
        diag = getattr(error, "diag", None)
        primary = getattr(diag, "message_primary", None) or str(error)
        message = " ".join(primary.split())[:_MESSAGE_CHARS] or type(error).__name__
        if self._secrets is not None:
            message = self._secrets.sub("***", message)
        return StoreError(f"{self.url}: {what}: {message}")

    def _connect(self, what: str) -> psycopg.Connection[Any]:
        """The store's connection, opened (and the tables made) if there is none or it broke;
        call with the lock held."""
        if self._closed:
            raise StoreError(f"{self.url}: the store is closed")
        current = self._connection
        if current is not None and not current.broken and not current.closed:
            return current
        self._connection = None
        if current is not None:
            current.close()
        pg = self._psycopg
        try:
            given = pg.conninfo.conninfo_to_dict(self._conninfo)
            extra: dict[str, Any] = {}
            if "connect_timeout" not in given:
                extra["connect_timeout"] = CONNECT_TIMEOUT
            if "application_name" not in given:
                extra["application_name"] = "agenttrace"
            connection: psycopg.Connection[Any] = pg.connect(
                self._conninfo, autocommit=True, **extra
            )
        except pg.Error as error:
            raise self._error(what, error) from None
        try:
            row = connection.execute(_TABLES_EXIST).fetchone()
            if not (row and row[0]):
                with connection.transaction():
                    for statement in _CREATE_TABLES:
                        connection.execute(statement)
        except pg.Error as error:
            connection.close()
            raise self._error("create its tables", error) from None
        self._connection = connection
        return connection

    def _run(
        self, what: str, query: str, params: tuple[Any, ...], *, binary: bool = False
    ) -> tuple[int, list[tuple[Any, ...]]]:
        """Run one statement (its own transaction): the rows it changed and those it returned."""
        with self._lock:
            connection = self._connect(what)
            try:
                cursor = connection.execute(query, params, binary=binary)
                return cursor.rowcount, cursor.fetchall() if cursor.description else []
            except self._psycopg.Error as error:
                raise self._error(what, error) from None

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Create a segment, only if absent (see ``SessionStore.append``)."""
        check_session_id(session_id)
        check_segment_name(name)
        data = bytes(data)
        changed, _ = self._run(
            f"cannot write segment {name}", _APPEND, (session_id, name, len(data), data)
        )
        if changed == 0:
            raise SegmentExists(f"{self.url}: session {session_id} has a segment {name} already")

    def segments(self, session_id: str) -> list[SegmentInfo]:
        """The session's segments, sorted by name."""
        check_session_id(session_id)
        _, rows = self._run(f"cannot list the segments of {session_id}", _SEGMENTS, (session_id,))
        return sorted((SegmentInfo(name, size) for name, size in rows), key=lambda s: s.name)

    def read(self, session_id: str, name: str, limit: int) -> bytes:
        """A segment's bytes, refused past ``limit`` (its size is looked at first: bytes over
        the limit never leave the server)."""
        check_session_id(session_id)
        check_segment_name(name)
        _, rows = self._run(
            f"cannot read segment {name}", _READ, (max(limit, 0), session_id, name), binary=True
        )
        if not rows:
            raise StoreError(f"{self.url}: session {session_id} has no segment {name}")
        size, data = rows[0]
        if data is None or size > limit:
            raise SegmentTooLarge(
                f"{self.url}: segment {name} is {size} bytes, over the {limit}-byte limit"
            )
        return bytes(data)

    def manifest(self, session_id: str) -> Manifest | None:
        """The session's manifest, or None."""
        check_session_id(session_id)
        _, rows = self._run(
            f"cannot read the manifest of {session_id}",
            _MANIFEST,
            (MANIFEST_BYTES, session_id),
            binary=True,
        )
        if not rows:
            return None
        version, size, data = rows[0]
        if data is None:
            raise StoreError(
                f"{self.url}: the manifest of {session_id} is {size} bytes, over the limit"
                f" ({MANIFEST_BYTES})"
            )
        return Manifest(bytes(data), str(version))

    def swap_manifest(self, session_id: str, data: bytes, expected: str | None) -> str:
        """Compare-and-swap the manifest on its version column."""
        check_session_id(session_id)
        if len(data) > MANIFEST_BYTES:
            raise StoreError(
                f"{self.url}: a manifest of {len(data)} bytes is over the limit ({MANIFEST_BYTES})"
            )
        what = f"cannot write the manifest of {session_id}"
        data = bytes(data)
        if expected is None:
            _, rows = self._run(what, _FIRST_MANIFEST, (session_id, data))
            if not rows:
                raise ManifestConflict(f"{self.url}: session {session_id} has a manifest already")
            return str(rows[0][0])
        # A version this store never gave out (not a bigint) matches no row: a conflict too.
        given = expected.isascii() and expected.isdigit() and len(expected) < 19
        old = int(expected) if given else -1
        _, rows = self._run(what, _SWAP_MANIFEST, (data, session_id, old))
        if not rows:
            raise ManifestConflict(
                f"{self.url}: the manifest of {session_id} is no longer version {expected}"
            )
        return str(rows[0][0])

    def sessions(self) -> list[str]:
        """The ids of the sessions with a segment or a manifest, sorted; a row whose id is not a
        session id (written by something else) is left out."""
        _, rows = self._run("cannot list sessions", _SESSIONS, ())
        found = []
        for (session_id,) in rows:
            try:
                found.append(check_session_id(session_id))
            except SessionFileError:
                continue
        return sorted(found)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
