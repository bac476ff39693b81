"""A session store in an S3 bucket (``s3://bucket/prefix``), through fsspec's s3fs, for hosts that
share no disk.

Layout, under ``s3://bucket/prefix/``::

    <session_id>/segments/<name>     each segment, created once
    <session_id>/manifest            "<nonce>\\n" then the manifest's bytes

Both promises rest on S3's own conditional writes, never a check-then-write here:

- ``append`` is one ``PutObject`` with ``If-None-Match: *``: S3 refuses it (412) if the key
  exists, so of two writers racing for a name exactly one wins, and a reader sees a whole object
  or none.
- ``swap_manifest`` is one ``PutObject`` with ``If-Match: <ETag>`` (or ``If-None-Match: *`` for
  the first manifest), and the new version is the ETag S3 returns. A single-part ETag is the MD5
  of the body, so the same bytes swapped in again would get the same ETag back (an A-B-A a stale
  swapper could win): a random nonce line before the bytes makes every version's ETag new.

S3 answers 409 ``ConditionalRequestConflict`` when two conditional writes to one key overlap;
that is retried (a few times, briefly), after which the write wins or is refused like any other.
Reads are bounded: one ranged ``GetObject`` asks for at most ``limit + 1`` bytes, and the size S3
reports (``Content-Range``) is checked before the body is read.

Endpoint, region and credentials come from the standard AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``, ``AWS_MAX_ATTEMPTS``, profiles): the URL holds
no secret and takes no options.

The requests run on s3fs's event loop (fsspec's, in a thread of its own), whose default
executor aiohttp resolves host names through (and aiobotocore builds SSL contexts and runs
credential processes in). At the interpreter's exit, ``concurrent.futures`` stops every thread
pool (its hook runs as the main thread ends, before ``atexit``'s callbacks), so a pool refuses
new work by the time ``init()``'s exit hook ships the last of a session: the loop gets a
default executor of ours (:class:`_ExitProofPool`) that then runs each call in a thread of its
own, bounded by the store's timeouts as every request is.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import threading
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit

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

__all__ = ["S3Store", "open_s3_store"]

_SEGMENTS = "segments/"
_MANIFEST = "manifest"
_NONCE_BYTES = 16
_HEADER = 2 * _NONCE_BYTES + 1  # the nonce in hex and its newline
_CONFLICT_TRIES = 5
"""Tries of a conditional write S3 answered 409 (another conditional write to the key under
way): the next try is refused (412) or wins once the other is through."""

# S3's bucket names: 3 to 63 lowercase letters, digits, dots and hyphens.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_PREFIX_PART = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")
_CONTENT_RANGE = re.compile(r"^bytes \d+-\d+/(\d+)$")
_LOADER: list[Any] = []
_LOADER_LOCK = threading.Lock()
_POOLED: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
"""The event loops given an :class:`_ExitProofPool` (fsspec's one loop; a new one after a fork)."""
_POOLED_LOCK = threading.Lock()

T = TypeVar("T")


def open_s3_store(url: str) -> S3Store:
    """The store at ``s3://bucket/prefix``: :class:`StoreError` for a URL that is not one (with
    credentials or options in it), or when s3fs is not installed."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        # Never echo the URL: what precedes the @ is likely a secret.
        raise StoreError(
            "an s3:// store URL holds no credentials: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or a profile) in the environment"
        )
    if parts.query or parts.fragment:
        raise StoreError(
            f"an s3:// store URL takes no options: {parts.scheme}://{parts.netloc}{parts.path}"
            " (endpoint, region and credentials come from the AWS environment)"
        )
    return S3Store(parts.netloc, parts.path)


class S3Store:
    """Sessions under a prefix of an S3 bucket; see the module docstring for the layout and how it
    keeps the store's promises.

    ``attempts`` caps botocore's tries of one request (None: its own default, or
    ``AWS_MAX_ATTEMPTS``); ``connect_timeout`` and ``read_timeout`` are in seconds.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        attempts: int | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 15.0,
    ) -> None:
        prefix = prefix.strip("/")
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            raise StoreError(f"not an S3 bucket name: {bucket!r}")
        if prefix and not all(
            _PREFIX_PART.fullmatch(part) and part not in (".", "..") for part in prefix.split("/")
        ):
            raise StoreError(f"not a prefix for an S3 store: {prefix!r}")
        self.bucket = bucket
        self.prefix = prefix
        self.url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        self._base = f"{prefix}/" if prefix else ""
        try:
            import aiobotocore.session  # type: ignore[import-untyped]
            import s3fs  # type: ignore[import-untyped]
        except ImportError:
            raise StoreError(f"{self.url}: the S3 store needs s3fs: {install_hint('s3')}") from None
        # A botocore session of the store's own (credentials and endpoint as the environment says
        # now), sharing the process's one loader of service models: S3's model and endpoint
        # rules take some 0.3 s of CPU to parse, once instead of for every store opened.
        session = aiobotocore.session.AioSession()
        session.register_component("data_loader", _loader(session))
        config: dict[str, Any] = {"connect_timeout": connect_timeout, "read_timeout": read_timeout}
        if attempts is not None:
            config["retries"] = {"max_attempts": attempts, "mode": "standard"}
        # A client of our own (skip_instance_cache: fsspec would hand every caller one shared
        # instance, and close() would close it under them) with no listings cache, so each
        # listing asks S3 and sees what other hosts wrote since.
        self._fs: Any = s3fs.S3FileSystem(
            session=session,
            skip_instance_cache=True,
            use_listings_cache=False,
            config_kwargs=config,
        )
        # botocore retries what is worth retrying (connection errors, 5xx, throttling); s3fs's
        # own loop on top would multiply the tries and the waits.
        self._fs.retries = 1
        _pool_for(self._fs.loop)
        self._errors = _engine_errors()

    def _session(self, session_id: str) -> str:
        return f"{self._base}{check_session_id(session_id)}/"

    def _run(self, what: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` on s3fs's event loop; any engine exception becomes a one-line
        :class:`StoreError` naming the store."""
        from fsspec.asyn import sync  # type: ignore[import-untyped]

        async def call() -> T:
            return await work()

        try:
            result: T = sync(self._fs.loop, call)
        except StoreError:
            raise
        except self._errors as error:
            raise StoreError(f"{self.url}: cannot {what}: {_reason(error)}") from None
        return result

    async def _put(self, key: str, data: bytes, condition: dict[str, str]) -> str:
        """One conditional PutObject, tried again on 409; the new ETag.

        Sent by the aiobotocore client itself, not s3fs's ``call_s3``: that drops the arguments
        its botocore does not know, so with a botocore too old for ``IfMatch`` a conditional
        write would go out unconditional, silently. The client refuses them instead."""
        await self._fs.set_session()
        client = await self._fs.get_s3(self.bucket)
        tried = 1
        while True:
            try:
                response = await client.put_object(
                    Bucket=self.bucket, Key=key, Body=data, **condition
                )
            except Exception as error:  # re-raised unless S3 answered 409
                if _code(error) != "ConditionalRequestConflict" or tried == _CONFLICT_TRIES:
                    raise
                await asyncio.sleep(0.025 * 2**tried)
                tried += 1
            else:
                return str(response["ETag"])

    async def _get(self, key: str, limit: int) -> tuple[int, str, bytes | None] | None:
        """The object's size, ETag and bytes (None past ``limit``, the body never read), from one
        GET of at most ``limit + 1`` bytes; None if there is no such key."""
        try:
            response = await self._fs._call_s3(
                "get_object", Bucket=self.bucket, Key=key, Range=f"bytes=0-{max(limit, 0)}"
            )
        except OSError as error:
            code = _code(error)
            if code == "NoSuchKey":
                return None
            if code == "InvalidRange":
                # A range from byte 0 that S3 cannot satisfy: the object is empty.
                return 0, "", b"" if limit >= 0 else None
            raise
        body = response["Body"]
        try:
            matched = _CONTENT_RANGE.fullmatch(str(response.get("ContentRange", "")))
            # Without a Content-Range the server sent the whole object: its length is the size.
            size = int(matched.group(1)) if matched else int(response["ContentLength"])
            data = await body.read(limit + 1) if size <= limit else None
        finally:
            body.close()
        return size, str(response.get("ETag", "")), data

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Create a segment, only if absent (see ``SessionStore.append``)."""
        key = f"{self._session(session_id)}{_SEGMENTS}{check_segment_name(name)}"

        async def put() -> None:
            try:
                await self._put(key, data, {"IfNoneMatch": "*"})
            except Exception as error:  # re-raised unless S3 answered 412
                if _code(error) == "PreconditionFailed":
                    raise SegmentExists(
                        f"{self.url}: session {session_id} has a segment {name} already"
                    ) from None
                raise

        self._run(f"write segment {name}", put)

    def segments(self, session_id: str) -> list[SegmentInfo]:
        """The session's segments, sorted by name."""
        top = f"{self._session(session_id)}{_SEGMENTS}"

        async def listed() -> list[SegmentInfo]:
            found = []
            for item in await self._list(top, folders=False):
                name = item["Key"][len(top) :]
                if _is_segment_name(name):
                    found.append(SegmentInfo(name, int(item["Size"])))
            return found

        return sorted(self._run(f"list the segments of {session_id}", listed), key=_by_name)

    def read(self, session_id: str, name: str, limit: int) -> bytes:
        """A segment's bytes, refused past ``limit``."""
        key = f"{self._session(session_id)}{_SEGMENTS}{check_segment_name(name)}"
        got = self._run(f"read segment {name}", lambda: self._get(key, limit))
        if got is None:
            raise StoreError(f"{self.url}: session {session_id} has no segment {name}")
        size, _, data = got
        if data is None:
            raise SegmentTooLarge(
                f"{self.url}: segment {name} is {size} bytes, over the {limit}-byte limit"
            )
        if len(data) > limit:
            raise SegmentTooLarge(f"{self.url}: segment {name} grew past the {limit}-byte limit")
        return data

    def manifest(self, session_id: str) -> Manifest | None:
        """The session's manifest, or None."""
        key = f"{self._session(session_id)}{_MANIFEST}"
        got = self._run(
            f"read the manifest of {session_id}", lambda: self._get(key, MANIFEST_BYTES + _HEADER)
        )
        if got is None:
            return None
        _, etag, raw = got
        nonce, newline, data = (raw or b"").partition(b"\n")
        if raw is None or not newline or len(nonce) != 2 * _NONCE_BYTES or not etag:
            raise StoreError(f"{self.url}: the manifest of {session_id} is damaged")
        return Manifest(data, etag)

    def swap_manifest(self, session_id: str, data: bytes, expected: str | None) -> str:
        """Compare-and-swap the manifest with a conditional PutObject."""
        key = f"{self._session(session_id)}{_MANIFEST}"
        if len(data) > MANIFEST_BYTES:
            raise StoreError(
                f"{self.url}: a manifest of {len(data)} bytes is over the limit ({MANIFEST_BYTES})"
            )
        if expected is not None and not (expected.isprintable() and expected.isascii()):
            # Not a version this store gave out (and not something to put in a header).
            raise ManifestConflict(f"{self.url}: manifest of {session_id} is not {expected!r}")
        condition = {"IfNoneMatch": "*"} if expected is None else {"IfMatch": expected}
        body = secrets.token_hex(_NONCE_BYTES).encode() + b"\n" + data

        async def swap() -> str:
            try:
                return await self._put(key, body, condition)
            except Exception as error:  # re-raised unless S3 answered 412 or 404
                # 412: another version is there; 404 (If-Match): there is no manifest at all.
                if _code(error) in ("PreconditionFailed", "NoSuchKey"):
                    found = "another version" if _code(error) == "PreconditionFailed" else "none"
                    raise ManifestConflict(
                        f"{self.url}: manifest of {session_id} is {found}, not {expected}"
                    ) from None
                raise

        return self._run(f"write the manifest of {session_id}", swap)

    def sessions(self) -> list[str]:
        """The session ids under the prefix: its folders (a session's folder exists only while a
        segment or its manifest does)."""

        async def listed() -> list[str]:
            found = []
            for item in await self._list(self._base, folders=True):
                name = item["Prefix"][len(self._base) :].rstrip("/")
                if _is_session_id(name):
                    found.append(name)
            return found

        return sorted(self._run("list sessions", listed))

    async def _list(self, prefix: str, *, folders: bool) -> list[dict[str, Any]]:
        """Every object under ``prefix`` (or, with ``folders``, its next level of folders), asked
        of S3 each time, page by page."""
        found: list[dict[str, Any]] = []
        pages: dict[str, str] = {}
        while True:
            response = await self._fs._call_s3(
                "list_objects_v2",
                Bucket=self.bucket,
                Prefix=prefix,
                **({"Delimiter": "/"} if folders else {}),
                **pages,
            )
            found.extend(response.get("CommonPrefixes" if folders else "Contents", []))
            if not response.get("IsTruncated"):
                return found
            pages = {"ContinuationToken": response["NextContinuationToken"]}

    def close(self) -> None:
        """Close the S3 client's connections."""
        creator = getattr(self._fs, "_s3creator", None)
        if creator is not None:
            self._fs._s3creator = None
            self._fs._s3 = None
            self._fs.close_session(self._fs.loop, creator)


class _ExitProofPool(ThreadPoolExecutor):
    """The default executor of the loop the store's requests run on: a thread pool, which once
    the interpreter's exit stopped every pool (see the module docstring) runs each call in a
    daemon thread of its own instead of refusing it, so the last shipment at exit still
    resolves the store's host name."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        try:
            return super().submit(fn, *args, **kwargs)
        except RuntimeError:  # "cannot schedule new futures after [interpreter] shutdown"
            # Nobody but the interpreter's exit shuts this pool down: the loop never does
            # (fsspec runs it forever), and no one else holds it.
            return _in_a_thread(fn, args, kwargs)


def _in_a_thread(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future[T]:
    """``fn(*args, **kwargs)`` in a new daemon thread: its future."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = fn(*args, **kwargs)
        except BaseException as error:  # the caller's to see, through the future
            future.set_exception(error)
        else:
            future.set_result(result)

    # A thread that cannot start (an interpreter past its atexit callbacks) raises here: the
    # request fails as any other, and what it would have shipped stays in the sessions directory.
    threading.Thread(target=run, name="agenttrace-s3-exit", daemon=True).start()
    return future


def _pool_for(loop: asyncio.AbstractEventLoop) -> None:
    """Give ``loop`` an :class:`_ExitProofPool` as its default executor, once."""
    with _POOLED_LOCK:
        if loop in _POOLED:
            return
        _POOLED.add(loop)
    # The loop's own would be made at its first use; one made now behaves as that one until
    # the interpreter exits. Other fsspec users of the loop share it, as they share the loop.
    loop.set_default_executor(_ExitProofPool(thread_name_prefix="asyncio"))


def _loader(session: Any) -> Any:
    """botocore's loader of service models (it caches what it parsed), one for the process: made
    for the first session, as that session would have made its own (``AWS_DATA_PATH``)."""
    from botocore.loaders import create_loader  # type: ignore[import-untyped]

    with _LOADER_LOCK:
        if not _LOADER:
            _LOADER.append(create_loader(session.get_config_variable("data_path")))
        return _LOADER[0]


def _engine_errors() -> tuple[type[BaseException], ...]:
    """What botocore, aiohttp and s3fs raise: a store turns each into a :class:`StoreError`.
    (s3fs turns botocore's ClientError into an OSError whose cause is the ClientError; the
    conditional puts, sent by the client itself, raise the ClientError.)"""
    import aiohttp
    from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

    return (OSError, BotoCoreError, ClientError, aiohttp.ClientError, asyncio.TimeoutError)


def _code(error: BaseException) -> str | None:
    """S3's error code (``NoSuchKey``, ``PreconditionFailed``...) behind an exception s3fs
    translated, if it came from an S3 answer."""
    seen: BaseException | None = error
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            return str(response.get("Error", {}).get("Code") or "") or None
        seen = seen.__cause__
    return None


def _reason(error: BaseException) -> str:
    """The error in one line: S3's code and message, or the exception's own words."""
    text = " ".join(str(error).split()) or type(error).__name__
    code = _code(error)
    return f"{code}: {text}" if code and code not in text else text


def _is_segment_name(name: str) -> bool:
    try:
        check_segment_name(name)
    except StoreError:
        return False  # an object some other program left in the folder: not ours
    return True


def _is_session_id(name: str) -> bool:
    try:
        check_session_id(name)
    except SessionFileError:
        return False  # a folder no session could have made
    return True


def _by_name(segment: SegmentInfo) -> str:
    return segment.name
