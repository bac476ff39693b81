"""Readers take regular files only, and stop at their limits.

A FIFO, a device, a directory or a socket given as a session is refused at once (once a FIFO
hung every reader forever and ``/dev/zero`` was read until memory ran out); a session file past
the compressed or decompressed cap, a stream past its size cap or with a line past the line cap,
is a :class:`SessionFileError` naming the limit and the variable that raises it. A gzip bomb is
cut off at the cap without allocating past it (measured with tracemalloc).
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import os
import socket
import struct
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import agenttrace
from agenttrace import SessionFileError
from agenttrace._internal.config import MIB, RATIO_FREE_BYTES, ReadLimits, Settings
from agenttrace.formats.session import files as session_files
from agenttrace.formats.session.files import read_session_file, snapshot_bytes
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.formats.session.spool import gzip_member
from agenttrace.views.viewer import SessionViewer

from .test_session_files import EXAMPLE_1, jsonl

LIMIT_VARIABLES = (
    "AGENTTRACE_MAX_COMPRESSED_BYTES",
    "AGENTTRACE_MAX_DECOMPRESSED_BYTES",
    "AGENTTRACE_MAX_STREAM_BYTES",
    "AGENTTRACE_MAX_LINE_BYTES",
)
BOMB_BYTES = 1 << 30
"""What the gzip bomb expands to: 1 GiB of zeros, in about 1 MB."""


def meta_for(session_id: str) -> dict[str, object]:
    """A session file's ``meta`` as agenttrace writes it (the schema requires its fields)."""
    return {"createdAt": 1795393954000, "updatedAt": 1795393955000, "session_id": session_id}


def refused(path: Path, limits: ReadLimits | None = None) -> str:
    with pytest.raises(SessionFileError) as caught:
        read_session_file(path, limits=limits)
    message = str(caught.value)
    assert message and "\n" not in message, repr(message)
    return message


def lines_of(events: list[dict[str, object]]) -> list[bytes]:
    return [json.dumps(e).encode() for e in events]


def gzip_bomb(path: Path, mebibytes: int) -> None:
    """A valid gzip file of ``mebibytes`` MiB of zeros, level 9, made without compressing them
    all: after a full flush deflate forgets its history, so each further MiB of zeros
    compresses to the same block, written again and again; then the end and the CRC."""
    zeros = bytes(MIB)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mebibytes):
        crc = zlib.crc32(zeros, crc)
    with open(path, "wb") as handle:
        handle.write(first)
        for _ in range(mebibytes - 1):
            handle.write(block)
        # An empty final block, then the gzip trailer: CRC-32 and size mod 2**32.
        handle.write(b"\x03\x00" + struct.pack("<II", crc, (mebibytes * MIB) & 0xFFFFFFFF))


def test_the_bomb_is_a_valid_gzip_file(tmp_path: Path) -> None:
    path = tmp_path / "small-bomb.gz"
    gzip_bomb(path, 3)
    assert gzip.decompress(path.read_bytes()) == bytes(3 * MIB)


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real gzip bomb: about 1 MB that expands to 1 GiB of zeros."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.json.gz"
    gzip_bomb(path, BOMB_BYTES // MIB)
    assert path.stat().st_size < 2 * MIB
    return path


# --- not a regular file ---------------------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO no one writes to. Should a reader block on it anyway, a watchdog opens its write
    end after 30 s, so the test fails on its assertion instead of hanging."""
    path = tmp_path / "pipe.events.jsonl"
    os.mkfifo(path)
    done = threading.Event()

    def watchdog() -> None:
        if not done.wait(30):
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # releases a reader blocked in open
            os.close(fd)

    thread = threading.Thread(target=watchdog, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        done.set()
        thread.join()


def test_a_fifo_is_refused_at_once(fifo: Path) -> None:
    assert refused(fifo) == f"{fifo}: is a FIFO, not a session file"


def test_a_fifo_found_by_id_is_refused(fifo: Path) -> None:
    with pytest.raises(SessionFileError, match=r"is a FIFO, not a session file$"):
        agenttrace.resume("pipe", sessions_dir=fifo.parent)


def test_a_fifo_beside_the_file_read_is_ignored(fifo: Path) -> None:
    """The session file beside a stream is read too: a FIFO there must not block that."""
    stream = fifo.with_name("pipe.json.gz")  # a real file; its sibling pipe.events.jsonl: the FIFO
    stream.write_bytes(snapshot_bytes("pipe", [], lines_of(EXAMPLE_1), meta_for("pipe")))
    assert load_fullest(stream).events == EXAMPLE_1


def test_dev_zero_behind_a_symlink_is_refused(tmp_path: Path) -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    for name in ("zero.events.jsonl", "zero.json.gz"):
        link = tmp_path / name
        link.symlink_to("/dev/zero")
        assert refused(link) == f"{link}: is a character device, not a session file"


def test_a_directory_and_a_link_to_one_are_refused(tmp_path: Path) -> None:
    directory = tmp_path / "dir.json.gz"
    directory.mkdir()
    link = tmp_path / "link.events.jsonl"
    link.symlink_to(directory)
    for path in (directory, link):
        assert refused(path) == f"{path}: is a directory, not a session file"


def test_a_socket_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a relative name: socket paths are limited to ~100 bytes
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind("sock.events.jsonl")
        server.listen(1)
        path = tmp_path / "sock.events.jsonl"
        assert refused(path) == f"{path}: is a socket, not a session file"


# --- size limits ---------------------------------------------------------------------------------


def test_a_gzip_bomb_stops_at_the_cap_without_allocating_past_it(bomb: Path) -> None:
    cap = 32 * MIB
    limits = ReadLimits(decompressed_bytes=cap)
    tracemalloc.start()
    try:
        message = refused(bomb, limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message == (
        f"{bomb}: decompresses to more than 32 MiB, the limit; to read it, raise "
        f"AGENTTRACE_MAX_DECOMPRESSED_BYTES (now {cap})"
    )
    # The cap, the last block decompressed and the bytearray's growth margin; never the GiB.
    assert peak < 3 * cap, f"peak {peak / MIB:.0f} MiB reading a bomb capped at 32 MiB"


def test_with_the_default_limits_a_bomb_stops_at_its_compression_ratio(bomb: Path) -> None:
    """1 GiB is under the default decompressed cap; 1,000 times its size on disk is not."""
    size = bomb.stat().st_size
    cap = max(RATIO_FREE_BYTES, size * 100)
    tracemalloc.start()
    try:
        message = refused(bomb, ReadLimits())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    amount = f"{cap // MIB} MiB" if cap % MIB == 0 else f"{cap} bytes"
    assert message == (
        f"{bomb}: decompresses to more than {amount} (100 times its size), the limit; to read "
        "it, raise AGENTTRACE_MAX_COMPRESSION_RATIO (now 100)"
    )
    assert peak < 3 * cap


def test_a_file_compressed_better_than_the_ratio_is_read_below_the_ratio_free_size(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(snapshot_bytes("s1", [], lines_of(EXAMPLE_1), meta_for("s1")))
    size = len(gzip.decompress(path.read_bytes()))
    assert size > path.stat().st_size  # so a ratio of 1 is past it, but for the free size
    assert read_session_file(path, limits=ReadLimits(compression_ratio=1)).events == EXAMPLE_1


def test_the_decompressed_cap_comes_from_the_environment(
    bomb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTTRACE_MAX_DECOMPRESSED_BYTES", str(MIB))
    with pytest.raises(SessionFileError, match=r"raise AGENTTRACE_MAX_DECOMPRESSED_BYTES \(now"):
        agenttrace.resume(bomb)


def test_the_decompressed_cap_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(snapshot_bytes("s1", [], lines_of(EXAMPLE_1), meta_for("s1")))
    size = len(gzip.decompress(path.read_bytes()))
    assert read_session_file(path, limits=ReadLimits(decompressed_bytes=size)).events == EXAMPLE_1
    assert refused(path, ReadLimits(decompressed_bytes=size - 1)) == (
        f"{path}: decompresses to more than {size - 1} bytes, the limit; to read it, raise "
        f"AGENTTRACE_MAX_DECOMPRESSED_BYTES (now {size - 1})"
    )


def test_decompressing_in_small_steps_reads_every_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session file of several gzip members (as agenttrace writes them), decompressed a few
    bytes per call: output held back inside zlib is drained, no member is lost or cut."""
    document = gzip.decompress(snapshot_bytes("s1", [], lines_of(EXAMPLE_1), meta_for("s1")))
    cuts = [0, 7, 100, len(document) // 2, len(document) - 3, len(document)]
    path = tmp_path / "s1.json.gz"
    path.write_bytes(b"".join(gzip_member(document[a:b]) for a, b in itertools.pairwise(cuts)))
    expected = read_session_file(path).events
    monkeypatch.setattr(session_files, "_DECOMPRESS_STEP", 5)
    assert read_session_file(path).events == expected == EXAMPLE_1


def test_the_compressed_cap(tmp_path: Path) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(snapshot_bytes("s1", [], lines_of(EXAMPLE_1), meta_for("s1")))
    size = path.stat().st_size
    assert read_session_file(path, limits=ReadLimits(compressed_bytes=size)).events == EXAMPLE_1
    assert refused(path, ReadLimits(compressed_bytes=size - 1)) == (
        f"{path}: a session file of more than {size - 1} bytes, the limit; to read it, raise "
        f"AGENTTRACE_MAX_COMPRESSED_BYTES (now {size - 1})"
    )


def test_the_stream_cap(tmp_path: Path) -> None:
    path = tmp_path / "s1.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1))
    size = path.stat().st_size
    assert read_session_file(path, limits=ReadLimits(stream_bytes=size)).events == EXAMPLE_1
    assert refused(path, ReadLimits(stream_bytes=size - 1)) == (
        f"{path}: an event stream of more than {size - 1} bytes, the limit; to read it, raise "
        f"AGENTTRACE_MAX_STREAM_BYTES (now {size - 1})"
    )


def test_a_stream_with_an_overlong_line(tmp_path: Path) -> None:
    long = {**EXAMPLE_1[2], "content": "x" * 4000}
    path = tmp_path / "s1.events.jsonl"
    path.write_text(jsonl([*EXAMPLE_1[:2], long, *EXAMPLE_1[3:]]))
    length = len(json.dumps(long).encode())
    loaded = read_session_file(path, limits=ReadLimits(line_bytes=length))
    assert loaded.events[2]["content"] == "x" * 4000
    assert refused(path, ReadLimits(line_bytes=length - 1)) == (
        f"{path}: line 3 is more than {length - 1} bytes, the limit; to read it, raise "
        f"AGENTTRACE_MAX_LINE_BYTES (now {length - 1})"
    )


def test_an_overlong_line_with_no_newline_is_not_taken_for_a_torn_one(tmp_path: Path) -> None:
    """One huge line and no newline: a file that is no stream, refused by the line cap, not
    read whole as a torn last line."""
    path = tmp_path / "blob.events.jsonl"
    path.write_bytes(b"{" * 5000)
    assert "line 1 is more than 1024 bytes" in refused(path, ReadLimits(line_bytes=1024))


# --- configuration ------------------------------------------------------------------------------


def test_limits_are_generous_by_default() -> None:
    assert ReadLimits.from_env({}) == ReadLimits(256 * MIB, 1024 * MIB, 1024 * MIB, 64 * MIB)
    assert Settings.resolve({}).read_limits == ReadLimits()


def test_limits_from_the_environment(caplog: pytest.LogCaptureFixture) -> None:
    env = dict(zip(LIMIT_VARIABLES, ("1", "2", "3", "4"), strict=True))
    assert ReadLimits.from_env(env) == ReadLimits(1, 2, 3, 4)
    assert Settings.resolve(env).read_limits == ReadLimits(1, 2, 3, 4)
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        limits = ReadLimits.from_env({"AGENTTRACE_MAX_LINE_BYTES": "lots"})
    assert limits == ReadLimits()
    assert "AGENTTRACE_MAX_LINE_BYTES='lots' is not a size in bytes; using 67108864" in caplog.text


def test_read_session_file_takes_the_environment_when_given_no_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s1.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1))
    monkeypatch.setenv("AGENTTRACE_MAX_STREAM_BYTES", "10")
    assert "raise AGENTTRACE_MAX_STREAM_BYTES (now 10)" in refused(path)


@pytest.mark.parametrize(
    "reader",
    [read_session_file, load_fullest, agenttrace.Session.load, SessionViewer],
    ids=lambda r: r.__qualname__,
)
def test_every_reader_has_the_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: Callable[[Path], object]
) -> None:
    path = tmp_path / "s1.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1))
    monkeypatch.setenv("AGENTTRACE_MAX_LINE_BYTES", "20")
    with pytest.raises(SessionFileError, match="line 1 is more than 20 bytes"):
        reader(path)
