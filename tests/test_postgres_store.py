"""What the conformance suite cannot say of the PostgreSQL store: how it fails when the server
cannot be reached or refuses the password (one line, quickly, no password in it), that writers
on separate connections (other hosts) race in the engine and not behind the store's lock, that
processes opening a new store at once all get its tables, and that a dropped connection is
opened again. All on the real server of tests/store_servers.py."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from agenttrace.formats.stores import (
    ManifestConflict,
    SegmentExists,
    SessionStore,
    StoreError,
    open_store,
    postgres,
)
from agenttrace.formats.stores.postgres import public_url

from .listening import free_port
from .store_servers import postgres_schema, postgres_server, stop_store_servers


@pytest.fixture(scope="session", autouse=True)
def store_servers() -> Iterator[None]:
    """Stop the server these tests started (on first use) when the session ends."""
    yield
    stop_store_servers()


@pytest.fixture
def url() -> Iterator[str]:
    with postgres_schema() as fresh:
        yield fresh


def _one_line_without(error: BaseException, *secrets: str) -> str:
    message = str(error)
    assert "\n" not in message
    for secret in secrets:
        assert secret not in message
    return message


def test_a_server_that_is_not_there_is_a_quick_one_line_error() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        open_store(f"postgresql://someone:s3cret-pw@127.0.0.1:{port}/db")
    assert time.monotonic() - started < 5
    message = _one_line_without(raised.value, "s3cret-pw")
    assert message.startswith(f"postgresql://someone@127.0.0.1:{port}/db: connect: ")
    assert "refused" in message
    with pytest.raises(StoreError) as raised:
        open_store(f"postgresql://someone:p@127.0.0.1:{port}/db")
    assert f"port {port} failed" in str(raised.value)  # a short password eats no word


def test_a_url_that_cannot_be_parsed_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="not a store URL") as raised:
        open_store("postgresql://someone:s3cret@[::1/db")
    assert "s3cret" not in str(raised.value)


@pytest.mark.slow  # waits out the 2-second timeout (libpq's least)
def test_a_server_that_never_answers_fails_within_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A socket that listens but never accepts: the kernel completes the handshake and the
    # server's greeting never comes, as with a host that has stopped answering.
    monkeypatch.setattr(postgres, "CONNECT_TIMEOUT", 2)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(StoreError) as raised:
            open_store(f"postgresql://someone:pw-123@127.0.0.1:{port}/db")
        elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 10
    assert "timeout" in _one_line_without(raised.value, "pw-123").lower()


def test_a_wrong_password_is_refused_without_showing_either_password(url: str) -> None:
    server = postgres_server()
    wrong = "Wr0ng%40pass-word"  # percent-encoded in the URL: "Wr0ng@pass-word"
    bad_url = url.replace(f":{server.password}@", f":{wrong}@")
    with pytest.raises(StoreError) as raised:
        open_store(bad_url)
    message = _one_line_without(raised.value, wrong, "Wr0ng@pass-word", server.password)
    assert "password authentication failed" in message
    assert message.startswith(f"postgresql://agenttrace@127.0.0.1:{server.port}/postgres?")


def test_a_password_libpq_cannot_parse_is_not_echoed() -> None:
    # libpq quotes the token it cannot decode, here the password itself.
    with pytest.raises(StoreError) as raised:
        open_store(f"postgresql://someone:bad%zzpass@127.0.0.1:{free_port()}/db")
    assert "percent-encoded" in _one_line_without(raised.value, "bad%zzpass", "zzpass")


def test_the_url_shown_has_no_password() -> None:
    assert (
        public_url("postgresql://me:pa%3Ass@db.example:5433/traces?sslmode=require&password=x")
        == "postgresql://me@db.example:5433/traces?sslmode=require"
    )
    assert public_url("postgres://db1:5432,db2:5432/t") == "postgres://db1:5432,db2:5432/t"


def test_a_store_opened_by_url_shows_it_without_the_password(url: str) -> None:
    store = open_store(url.replace("postgresql://", "postgres://"))
    try:
        assert postgres_server().password not in store.url
        assert store.url.startswith("postgres://agenttrace@127.0.0.1:")
        assert store.sessions() == []
    finally:
        store.close()


def _race(url: str, attempt: Callable[[SessionStore, int], None], lost: type[Exception]) -> int:
    """Run ``attempt`` from 8 stores at once, each its own connection (another host); return
    how many won."""
    stores = [open_store(url) for _ in range(8)]
    start = threading.Barrier(len(stores))
    won: list[int] = []
    failed: list[BaseException] = []

    def race(index: int) -> None:
        start.wait()
        try:
            attempt(stores[index], index)
        except lost:
            return
        except BaseException as error:  # reported below, not lost in the thread
            failed.append(error)
        else:
            won.append(index)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for store in stores:
            store.close()
    assert failed == []
    return len(won)


def test_of_hosts_racing_for_one_segment_exactly_one_wins(url: str) -> None:
    def append(store: SessionStore, index: int) -> None:
        store.append("sess_1", "race", f"host {index}".encode())

    assert _race(url, append, SegmentExists) == 1


def test_of_hosts_racing_from_one_manifest_version_exactly_one_wins(url: str) -> None:
    store = open_store(url)
    try:
        base = store.swap_manifest("sess_1", b"base", None)

        def swap(other: SessionStore, index: int) -> None:
            other.swap_manifest("sess_1", f"host {index}".encode(), base)

        assert _race(url, swap, ManifestConflict) == 1
        read = store.manifest("sess_1")
        assert read is not None and read.version == str(int(base) + 1)
    finally:
        store.close()


def test_of_hosts_racing_for_the_first_manifest_exactly_one_wins(url: str) -> None:
    def first(store: SessionStore, index: int) -> None:
        store.swap_manifest("sess_1", f"host {index}".encode(), None)

    assert _race(url, first, ManifestConflict) == 1


def test_hosts_opening_a_new_store_at_once_all_get_its_tables(url: str) -> None:
    # Another session holds an uncommitted CREATE TABLE of the same name, so each opening
    # store's CREATE TABLE IF NOT EXISTS waits on it; when it rolls back they go on together.
    # Without the store's advisory lock all but one would then fail on the catalog's index.
    import psycopg

    opened: list[SessionStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(open_store(url))
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)

    watcher = postgres_server().admin()
    with psycopg.connect(url) as blocker:
        blocker.execute("CREATE TABLE agenttrace_segments (held int)")
        threads = [threading.Thread(target=open_one) for _ in range(8)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        waiting = 0
        while waiting < len(threads) and time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'agenttrace'"
                " AND wait_event_type = 'Lock'"
            ).fetchone()
            waiting = row[0] if row else 0
            time.sleep(0.01)  # polling the server for the openers to reach the lock
        blocker.rollback()
        for thread in threads:
            thread.join()
    try:
        assert waiting == len(threads)
        assert errors == []
        for index, store in enumerate(opened):
            store.append("sess_1", f"seg{index}", b"x")
        assert len(opened[0].segments("sess_1")) == len(threads)
    finally:
        for store in opened:
            store.close()


def test_a_dropped_connection_fails_one_call_and_is_opened_again(url: str) -> None:
    store = open_store(url)
    try:
        store.append("sess_1", "before", b"1")
        postgres_server().admin().execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'agenttrace'"
        )
        with pytest.raises(StoreError) as raised:
            store.segments("sess_1")
        _one_line_without(raised.value, postgres_server().password)
        assert [s.name for s in store.segments("sess_1")] == ["before"]
    finally:
        store.close()


def test_a_closed_store_is_not_opened_again(url: str) -> None:
    store = open_store(url)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.sessions()


def test_without_psycopg_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what `import psycopg` meets when absent
    with pytest.raises(StoreError) as raised:
        open_store("postgresql://someone@127.0.0.1/db")
    assert str(raised.value) == (
        "a postgresql:// store needs psycopg 3: "
        "pip install 'psycopg[binary]>=3.2,<4' (the [postgres] extra)"
    )


def test_a_schema_that_does_not_exist_is_a_one_line_error() -> None:
    server = postgres_server()
    with pytest.raises(StoreError, match="create its tables: no schema has been selected"):
        open_store(server.url(options="-csearch_path%3Dno_such_schema"))


def test_a_role_that_may_only_read_and_write_opens_a_store_made_by_another(url: str) -> None:
    # What the how-to promises an operator: tables made once (or by a DBA), then SELECT,
    # INSERT and UPDATE are all a store's role needs.
    server = postgres_server()
    admin = server.admin()
    schema = url.rpartition("%3D")[2]
    role, password = f"writer_{schema}", "writer-pw"
    open_store(url).close()  # the tables, made by the superuser
    admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    try:
        admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE ON {schema}.agenttrace_segments,"
            f" {schema}.agenttrace_manifests TO {role}"
        )
        as_role = url.replace(f"{server.user}:{server.password}@", f"{role}:{password}@")
        store = open_store(as_role)
        try:
            store.append("sess_1", "seg", b"x")
            version = store.swap_manifest("sess_1", b"m1", None)
            store.swap_manifest("sess_1", b"m2", version)
            assert store.sessions() == ["sess_1"]
        finally:
            store.close()
        fresh = as_role.replace(f"%3D{schema}", "%3Dpublic")  # no tables there, no CREATE
        with pytest.raises(StoreError, match="create its tables: permission denied") as raised:
            open_store(fresh)
        _one_line_without(raised.value, password)
    finally:
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE {role}")
