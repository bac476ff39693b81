"""The session stores the conformance suite (tests/test_session_stores.py) runs against, each
on a real engine: a directory here; S3 and PostgreSQL servers on 127.0.0.1 as their modules add
them. Each entry opens a fresh, empty store (a new directory, bucket prefix or schema) for one
test, and yields the store with a function that opens a second client of the same store (what
another host would hold).

A server is started once per test session, on first use, and stopped by
:func:`stop_store_servers`: the test modules' session-scoped fixtures call it at the end, and
it is registered to run at exit too."""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrace.formats.stores import SessionStore, open_store

from .listening import free_port

OpenedStore = tuple[SessionStore, Callable[[], SessionStore]]


@contextlib.contextmanager
def local_store(tmp_path: Path) -> Iterator[OpenedStore]:
    """A store in a fresh directory, opened by its file:// URL."""
    url = (tmp_path / "store").as_uri()
    store = open_store(url)
    try:
        yield store, lambda: open_store(url)
    finally:
        store.close()


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (``initdb``, ``pg_ctl``): on ``PATH``, else
    Debian's newest ``/usr/lib/postgresql/<version>/bin``; None where there are none."""
    on_path = shutil.which("pg_ctl")
    folders = [Path(on_path).resolve().parent] if on_path else []
    folders += sorted(
        (Path(found) for found in glob.glob("/usr/lib/postgresql/*/bin")),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
        reverse=True,
    )
    for folder in folders:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


class PostgresServer:
    """A throwaway PostgreSQL cluster on 127.0.0.1: its data and unix socket in a temporary
    folder, a superuser ``agenttrace`` with a random password (password authentication over
    TCP, as a real server asks), durability off (fsync) since nothing outlives the tests."""

    user = "agenttrace"

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.password = secrets.token_hex(12)
        self.port = free_port()
        # initdb and the server refuse to run as root: as root, run them as the postgres user
        # (or nobody), in a folder of theirs.
        self.run_as: dict[str, Any] = {}
        # In /tmp, not $TMPDIR: the unix socket's path must stay under ~100 characters, and a
        # user other than root must reach the folder.
        self.folder = Path(tempfile.mkdtemp(prefix="agenttrace-pg-", dir="/tmp"))
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                account = pwd.getpwnam("nobody")
            self.run_as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
            os.chown(self.folder, account.pw_uid, account.pw_gid)
        self.data = self.folder / "data"
        self._admin: Any = None

    def _run(self, *command: str) -> None:
        done = subprocess.run(
            [str(self.bin_dir / command[0]), *command[1:]],
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=480,
            check=False,
            **self.run_as,
        )
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{command[0]} failed: {done.stderr or done.stdout}{tail}")

    def start(self) -> PostgresServer:
        """initdb, then start the server and wait until it takes connections."""
        password_file = self.folder / "password"
        password_file.write_text(self.password)
        if self.run_as:
            os.chown(password_file, self.run_as["user"], self.run_as["group"])
        self._run(
            "initdb", "-D", str(self.data), "-U", self.user, f"--pwfile={password_file}",
            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C",
            "--no-sync", "--no-instructions",
        )  # fmt: skip
        settings = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port}"
            f" -c unix_socket_directories={self.folder}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl", "start", "-D", str(self.data), "-w", "-t", "60",
            "-l", str(self.folder / "server.log"), "-o", settings,
        )  # fmt: skip
        return self

    def admin(self) -> Any:
        """The tests' own connection to the server (a superuser's), opened once."""
        import psycopg

        if self._admin is None:
            self._admin = psycopg.connect(self.url(), autocommit=True)
        return self._admin

    def stop(self) -> None:
        """Stop the server at once (nothing in it is kept) and remove its folder."""
        try:
            if self._admin is not None:
                self._admin.close()
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres", **params: str) -> str:
        """A ``postgresql://`` URL of the server, with its password and libpq ``params``."""
        query = "&".join(f"{key}={value}" for key, value in params.items())
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}" + (
            f"?{query}" if query else ""
        )


_servers: dict[str, PostgresServer | BaseException] = {}
_servers_lock = threading.Lock()


def postgres_server() -> PostgresServer:
    """The test session's PostgreSQL server, started on first use; skips the test where there is
    no PostgreSQL."""
    with _servers_lock:
        if "postgres" not in _servers:
            bin_dir = postgres_bin()
            if bin_dir is None:
                pytest.skip(
                    "no PostgreSQL server programs (initdb, pg_ctl) on PATH or in"
                    " /usr/lib/postgresql/*/bin: apt-get install postgresql"
                )
            server = PostgresServer(bin_dir)
            # The session fixtures stop it; this is for a test module that forgot to, so no
            # server outlives the test process.
            atexit.register(stop_store_servers)
            try:
                _servers["postgres"] = server.start()
            except BaseException as error:
                with contextlib.suppress(Exception):
                    server.stop()  # a server pg_ctl started but did not see ready
                shutil.rmtree(server.folder, ignore_errors=True)
                _servers["postgres"] = error
        found = _servers["postgres"]
    if isinstance(found, BaseException):
        raise found
    return found


def stop_store_servers() -> None:
    """Stop the servers this test session started."""
    with _servers_lock:
        started = [s for s in _servers.values() if isinstance(s, PostgresServer)]
        _servers.clear()
    for server in started:
        server.stop()


@contextlib.contextmanager
def postgres_schema() -> Iterator[str]:
    """The URL of a fresh, empty schema of the session's server, chosen by the URL's libpq
    ``options`` (``search_path``), as a user keeps two stores apart in one database; the
    schema is dropped after."""
    server = postgres_server()
    schema = f"t_{secrets.token_hex(6)}"
    server.admin().execute(f"CREATE SCHEMA {schema}")
    try:
        yield server.url(options=f"-csearch_path%3D{schema}")
    finally:
        server.admin().execute(f"DROP SCHEMA {schema} CASCADE")


@contextlib.contextmanager
def postgres_store(tmp_path: Path) -> Iterator[OpenedStore]:
    """A store in a fresh schema of the session's PostgreSQL server."""
    with postgres_schema() as url:
        store = open_store(url)
        try:
            yield store, lambda: open_store(url)
        finally:
            store.close()


S3_BUCKET = "agenttrace-tests"


def aws_environment(endpoint: str) -> dict[str, str]:
    """The AWS environment a client of a scripted S3 server on ``endpoint`` needs: any key
    (moto takes all), and no profile from the developer's ~/.aws."""
    return {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "agenttrace-test",
        "AWS_SECRET_ACCESS_KEY": "agenttrace-test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@functools.cache
def moto_endpoint() -> str:
    """The URL of moto's S3 server on 127.0.0.1, started once for the test session (on the first
    test that needs it) with :data:`S3_BUCKET` in it.

    moto's server mode as ``moto.server.ThreadedMotoServer`` runs it (moto's WSGI app in a
    threaded werkzeug server), with one difference: requests that write are served one at a
    time. moto 5.2.6 checks ``If-None-Match``/``If-Match`` and then writes, with no lock across
    the two (moto/s3/responses.py, ``put_object``), so two racing writers can both pass the check:
    with ``sys.setswitchinterval(1e-6)`` 4 of 60 eight-writer races had two winners. S3 makes the
    check and the write one step; serving writes one at a time makes moto do so too, so the
    suite's race tests fail only when a store does not send the conditions."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    moto = DomainDispatcherApplication(create_backend_app)
    writing = threading.Lock()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return moto(environ, start_response)
        with writing:
            return list(moto(environ, start_response))

    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, name="moto-s3", daemon=True).start()
    atexit.register(server.shutdown)
    endpoint = f"http://127.0.0.1:{server.server_port}"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in aws_environment(endpoint).items():
            patch.setenv(name, value)
        from agenttrace.formats.stores.s3 import S3Store

        store = S3Store(S3_BUCKET)
        try:
            store._fs.call_s3("create_bucket", Bucket=S3_BUCKET)
        finally:
            store.close()
    return endpoint


@contextlib.contextmanager
def s3_store(tmp_path: Path) -> Iterator[OpenedStore]:
    """A store under a fresh prefix of a bucket on moto's S3 server, opened by its s3:// URL with
    the endpoint and keys in the environment (as a user sets them)."""
    endpoint = moto_endpoint()
    url = f"s3://{S3_BUCKET}/{tmp_path.name}-{secrets.token_hex(4)}"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in aws_environment(endpoint).items():
            patch.setenv(name, value)
        store = open_store(url)
        try:
            yield store, lambda: open_store(url)
        finally:
            store.close()


def race(
    racers: int, attempt: Callable[[int], object], refused: type[BaseException]
) -> tuple[list[tuple[int, object]], list[tuple[int, BaseException]]]:
    """Run ``attempt(index)`` in ``racers`` threads released together by a barrier: the
    attempts that returned (index, result) and those refused with ``refused`` (index, error).
    Counts only, no timing: whichever thread runs first, a store must let exactly one win."""
    start = threading.Barrier(racers)
    won: list[tuple[int, object]] = []
    lost: list[tuple[int, BaseException]] = []

    def run(index: int) -> None:
        start.wait()
        try:
            won.append((index, attempt(index)))
        except refused as error:
            lost.append((index, error))

    threads = [threading.Thread(target=run, args=(index,)) for index in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return won, lost


STORES: dict[str, Callable[[Path], contextlib.AbstractContextManager[OpenedStore]]] = {
    "local": local_store,
    "postgres": postgres_store,
    "s3": s3_store,
}
"""Each store kind's opener, by the name the suite's ids show."""
