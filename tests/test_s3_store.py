"""What the conformance suite (tests/test_session_stores.py) cannot say about the S3 store: its
URL, and how it fails (no endpoint, no bucket, no credentials, no s3fs), each time in one line
that names the store. On moto's S3 server on 127.0.0.1 (tests/store_servers.py)."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator

import pytest

from agenttrace.formats.stores import ManifestConflict, SegmentExists, StoreError, open_store
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
    with pytest.raises(StoreError, match=r"pip install 'agenttrace-otel\[s3\]'"):
        open_store("s3://bucket/prefix")
