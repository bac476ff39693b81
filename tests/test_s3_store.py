"""What the conformance suite (tests/test_session_stores.py) cannot say about the S3 store: its
URL, and how it fails (no endpoint, no bucket, no credentials, no s3fs), each time in one line
that names the store. On moto's S3 server on 127.0.0.1 (tests/store_servers.py)."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agenttrace.formats.stores import ManifestConflict, SegmentExists, StoreError, open_store, s3
from agenttrace.formats.stores.s3 import S3Store

from .store_servers import S3_BUCKET, aws_environment, moto_endpoint


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch) -> str:
    endpoint = moto_endpoint()
    for name, value in aws_environment(endpoint).items():
        monkeypatch.setenv(name, value)
    return endpoint


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 nothing listens on (bound, so nothing else takes it meanwhile)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def one_line(error: pytest.ExceptionInfo[StoreError], url: str) -> str:
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{url}: "), message
    return message


def test_the_url_names_the_bucket_and_prefix(moto: str) -> None:
    assert open_store(f"s3://{S3_BUCKET}/team/a/").url == f"s3://{S3_BUCKET}/team/a"
    assert open_store(f"s3://{S3_BUCKET}").url == f"s3://{S3_BUCKET}"


@pytest.mark.parametrize(
    "url",
    [
        "s3://AKIAEXAMPLE:s3cr3t@bucket/prefix",
        "s3://bucket/prefix?endpoint_url=http://x",
        "s3://Not_A_Bucket/prefix",
        "s3:///prefix",
        "s3://bucket/a/../b",
    ],
)
def test_a_url_that_is_not_an_s3_store_is_refused_without_its_secret(url: str) -> None:
    with pytest.raises(StoreError) as error:
        open_store(url)
    assert "s3cr3t" not in str(error.value) and "\n" not in str(error.value)


def test_an_unreachable_endpoint_is_a_quick_one_line_error(
    closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in aws_environment(f"http://127.0.0.1:{closed_port}").items():
        monkeypatch.setenv(name, value)
    store = S3Store(S3_BUCKET, "prefix", attempts=1, connect_timeout=2)
    started = time.monotonic()
    try:
        with pytest.raises(StoreError) as error:
            store.sessions()
        message = one_line(error, f"s3://{S3_BUCKET}/prefix")
        assert "cannot list sessions" in message and f"127.0.0.1:{closed_port}" in message
        with pytest.raises(StoreError):
            store.append("sess_1", "seg", b"x")
    finally:
        store.close()
    # Two refused connections, no retry: far below botocore's default retries and waits.
    assert time.monotonic() - started < 10


def test_a_missing_bucket_is_an_error_not_an_empty_store(moto: str) -> None:
    url = "s3://agenttrace-no-such-bucket/prefix"
    store = open_store(url)
    try:
        for call in (
            store.sessions,
            lambda: store.segments("sess_1"),
            lambda: store.manifest("sess_1"),
            lambda: store.read("sess_1", "seg", limit=10),
        ):
            with pytest.raises(StoreError) as error:
                call()
            assert "NoSuchBucket" in one_line(error, url)
        # Not the answers of a store that has the bucket: neither promise is said to be broken.
        with pytest.raises(StoreError) as error:
            store.append("sess_1", "seg", b"x")
        assert not isinstance(error.value, SegmentExists)
        with pytest.raises(StoreError) as error:
            store.swap_manifest("sess_1", b"m", None)
        assert not isinstance(error.value, ManifestConflict)
        assert "NoSuchBucket" in one_line(error, url)
    finally:
        store.close()


def test_no_credentials_is_a_one_line_error(moto: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    url = f"s3://{S3_BUCKET}/prefix"
    store = open_store(url)
    try:
        with pytest.raises(StoreError) as error:
            store.sessions()
        assert "credentials" in one_line(error, url)
    finally:
        store.close()


def test_a_manifest_another_program_wrote_is_damaged_not_trusted(moto: str) -> None:
    store = S3Store(S3_BUCKET, f"damaged-{time.monotonic_ns()}")
    try:
        # An object at the manifest's key without the store's nonce line.
        store._fs.call_s3(
            "put_object", Bucket=S3_BUCKET, Key=f"{store.prefix}/sess_1/manifest", Body=b"{}"
        )
        with pytest.raises(StoreError, match="damaged"):
            store.manifest("sess_1")
    finally:
        store.close()


def test_without_s3fs_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "s3fs", None)  # what `import s3fs` meets when absent
    with pytest.raises(StoreError, match=r"pip install 's3fs>=2024\.12' \(the \[s3\] extra\)"):
        open_store("s3://bucket/prefix")


class ConflictingS3(BaseHTTPRequestHandler):
    """An S3 endpoint that answers the first ``conflicts`` PUTs with 409
    ConditionalRequestConflict (what S3 says while another conditional write to the key is in
    flight; moto never says it) and the next with 200 and an ETag; it records what was sent."""

    protocol_version = "HTTP/1.1"  # botocore sends Expect: 100-continue, answered from 1.1 on
    conflicts = 0
    puts: list[dict[str, str]] = []  # noqa: RUF012 (reset by the fixture)

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).puts.append(dict(self.headers))
        if len(self.puts) <= self.conflicts:
            body = (
                b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>ConditionalRequestConflict"
                b"</Code><Message>A conflicting conditional operation is in progress</Message>"
                b"</Error>"
            )
            self.send_response(409)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads ``puts``."""


@pytest.fixture
def conflicting(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[ConflictingS3]]:
    ConflictingS3.puts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ConflictingS3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for name, value in aws_environment(f"http://127.0.0.1:{server.server_port}").items():
        monkeypatch.setenv(name, value)
    try:
        yield ConflictingS3
    finally:
        server.shutdown()
        server.server_close()


def test_a_conditional_write_s3_says_conflicts_is_tried_again(
    conflicting: type[ConflictingS3],
) -> None:
    conflicting.conflicts = 2
    store = S3Store(S3_BUCKET, "prefix", attempts=1)
    try:
        store.append("sess_1", "seg", b"x")
        assert [put.get("If-None-Match") for put in conflicting.puts] == ["*", "*", "*"]
        conflicting.puts.clear()
        assert store.swap_manifest("sess_1", b"m", '"etag-read"') == (
            '"0123456789abcdef0123456789abcdef"'
        )
        assert [put.get("If-Match") for put in conflicting.puts] == ['"etag-read"'] * 3
    finally:
        store.close()


def test_a_conditional_write_that_keeps_conflicting_is_a_store_error(
    conflicting: type[ConflictingS3], monkeypatch: pytest.MonkeyPatch
) -> None:
    conflicting.conflicts = 100
    monkeypatch.setattr(s3, "_CONFLICT_TRIES", 3)
    store = S3Store(S3_BUCKET, "prefix", attempts=1)
    try:
        with pytest.raises(StoreError) as error:
            store.append("sess_1", "seg", b"x")
        assert not isinstance(error.value, SegmentExists)
        assert "ConditionalRequestConflict" in one_line(error, f"s3://{S3_BUCKET}/prefix")
        assert len(conflicting.puts) == 3
    finally:
        store.close()
