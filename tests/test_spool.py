"""The session file's spool (agenttrace/formats/session/spool.py): members kept in memory as
they came and moved to a temporary file, read back across both, and packed into one ref."""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path

from agenttrace.formats.session.spool import Ref, Spool, gzip_member, write_pieces


def _members(count: int, seed: int = 7) -> list[bytes]:
    chance = random.Random(seed)
    return [
        gzip_member(os.urandom(chance.randrange(1, 3000)) + b"%d" % index) for index in range(count)
    ]


def test_a_ref_reads_back_across_members_in_memory_and_on_file(tmp_path: Path) -> None:
    spool = Spool(tmp_path, spill_bytes=16 << 10)
    members = _members(60)
    refs = [spool.add(member) for member in members]
    assert spool.on_disk  # some moved to the file, the newest are still in memory
    whole = b"".join(members)
    assert spool.read(Ref(0, spool.size)) == whole
    chance = random.Random(3)
    for _ in range(200):  # any span: mid-member, across members, across file and memory
        start = chance.randrange(spool.size)
        length = chance.randrange(1, spool.size - start + 1)
        assert spool.read(Ref(start, length)) == whole[start : start + length]
    out = tmp_path / "copied"
    with out.open("wb") as handle:
        for ref in refs:
            spool.copy_to(handle, ref)
    assert out.read_bytes() == whole
    spool.close()


def test_pack_makes_one_ref_of_text_and_members_that_do_not_follow_each_other(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path, spill_bytes=4 << 10)
    first = spool.compress([b'{"a":1}'])
    spool.add(gzip_member(b"something else, in between"))
    second = spool.compress([b'{"b":2}'])
    packed = spool.pack([b"[", *first, b",", *second, b"]"])
    assert isinstance(packed, Ref)
    assert gzip.decompress(spool.read(packed)) == b'[{"a":1},{"b":2}]'
    written = tmp_path / "file.json.gz"
    write_pieces(written, [b'{"x":', packed, b"}"], spool)
    assert gzip.decompress(written.read_bytes()) == b'{"x":[{"a":1},{"b":2}]}'
    spool.close()


def test_pack_of_members_that_already_follow_each_other_copies_nothing(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    refs = [spool.add(member) for member in _members(5)]
    size = spool.size
    packed = spool.pack(refs)
    assert (packed.offset, packed.length) == (0, size)
    assert spool.size == size  # no copy
    assert spool.read(packed) == b"".join(spool.read(ref) for ref in refs)
    spool.close()
