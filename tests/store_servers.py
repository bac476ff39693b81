"""The session stores the conformance suite (tests/test_session_stores.py) runs against, each
on a real engine: a directory here; S3 and PostgreSQL servers on 127.0.0.1 as their modules add
them. Each entry opens a fresh, empty store (a new directory, bucket prefix or schema) for one
test, and yields the store with a function that opens a second client of the same store (what
another host would hold)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrace.formats.stores import SessionStore, open_store

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


STORES: dict[str, Callable[[Path], contextlib.AbstractContextManager[OpenedStore]]] = {
    "local": local_store,
    "s3": s3_store,
}
"""Each store kind's opener, by the name the suite's ids show."""
