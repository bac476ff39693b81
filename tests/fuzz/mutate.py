"""Mutations of real session files and event streams, as an attacker or an unlucky disk makes them.

Every mutation draws from one ``random.Random``: the same seed gives the same cases, byte for
byte, on every machine. Three levels:

- bytes: bit flips, truncation, a slice deleted, repeated or overwritten with tokens that
  matter to JSON and gzip (``NaN``, ``1e999``, ``"``, ``{``, a NUL, a newline);
- JSON values: a node of the document replaced by a value of another type, a non-finite or
  huge number, a list where a string goes, a deep nesting, an id with Unicode digits or a
  path in it, a field deleted, an id or a subtree copied somewhere else;
- JSON values of the same kind (:meth:`Mutator.kind_mutation`), which the schema the readers
  check mostly still accepts, so the file reaches the views: another node's value for the same
  field (its id, its label, its subtree), a digit of an id changed, markup or a line separator
  in a name, a number doubled, halved or negated, a list's items dropped, repeated or reversed;
- containers: the gzip members of a session file split, joined, truncated or followed by
  garbage; the lines of a stream dropped, repeated, reordered, torn or joined.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NEST = "\x00nest\x00"
"""Stands in a document for a deep nesting, written into the JSON text after encoding (a
value nested thousands deep cannot go through ``json.dumps``, which recurses)."""
_NEST_TOKEN = re.compile(r'"\\u0000nest\\u0000(\d+)([\[{])"')

INTERESTING: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    1,
    2**31,
    2**53 + 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**40,
    -(10**40),
    0.5,
    -0.0,
    1e308,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "0",
    "-1",
    "NaN",
    "x",
    "\U0001f642",
    "\x00",
    "\ud800",  # a lone surrogate: valid JSON, but not text any encoder writes back
    "2024-02-30T25:61:61.000Z",
    "9999-12-31T23:59:59.999Z",
    [],
    {},
    [1, 2],
    ["x"],
    [[[]]],
    {"": None},
    {"name": "x", "arguments": {}},
)
"""Values put in place of others: every JSON type, the edges of int and float, odd text."""

TRAVERSAL = ("../escaped", "../../../../tmp/escaped", "/etc/passwd", "a/b", "..", ".", "a\\b")
"""Ids that would leave a directory if they became a path."""

ODD_DIGITS = ("\u00b2", "\u0663", "\U0001d7d9", "\u2460", "\uff11", "9" * 5000, "0" * 40, "-1")
"""Things ``str.isdigit`` takes for digits that ``int`` does not (superscripts, circled,
4,300+ digits), and others it reads (Arabic-Indic, mathematical, full-width)."""

KIND_SHARE = 0.65
"""A case is drawn as a number in [0, 1): below 0.3 its bytes, lines or gzip members are
mutated; from there to this share its values keep their kind (:meth:`Mutator.kind_mutation`,
which the readers mostly accept: the views get them), and above it they change kind."""

BYTE_TOKENS = (
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e999",
    b"-1e999",
    b"18446744073709551616",
    b"\x00",
    b"\xff\xfe",
    b"\xed\xa0\x80",  # a surrogate encoded as UTF-8: not UTF-8
    b'"',
    b"\\",
    b"\\u",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\n",
    b"\r\n",
    b"null",
    b"[" * 64,
)

JUNK_LINES = (b"", b"   ", b"\xef\xbb\xbf", b"\x00", b"[]", b"{}", b"1")

_ID_KEY = re.compile(r"(^|_)id$|Id$|^cause$|^substance$|^tool_call_id$|^path$|^run$|^step$")
"""Keys whose values are ids or labels, the step journal's ``run`` and ``step`` among them."""

_FREE_TEXT = re.compile(
    r"(^|[._])name$|Name$|[Mm]odel$|^provider|^(content|text|message|error|errorType|payload|"
    r"details|arguments|role|callPath|argv0|source|result|evidence)$"
)
"""Keys whose values are any text (the others are ids, labels, times or kinds of a pattern): a
journal line's ``result`` (a tool's, as JSON text) and a decision's ``evidence`` too."""
ODD_TEXTS = (
    "",
    "[/red]",
    "[bold]x",
    "</script><script>alert(1)</script>",
    "a\u2028b",
    "a\u2029b\x85c",
    "\x1b[31mred\x1b[0m",
    "\u202egnp.exe",
    "%s%d{0}",
    "\U0001f642" * 3,
    "x" * 20_000,
)
"""Text that means something to rich, HTML, terminals, line splitting and format strings."""


@dataclass
class Seed:
    """A real file to mutate: its name (a session file's or a stream's), bytes and parse."""

    name: str
    data: bytes
    document: Any = None
    """A session file's JSON document, or a stream's list of event objects."""

    @property
    def is_snapshot(self) -> bool:
        return self.name.endswith(".json.gz")


@dataclass
class Mutant:
    """One case: the bytes of the file, what was done to make it, and a sibling to put beside
    it (the other half of a session, so the reader that pairs them pairs them)."""

    name: str
    data: bytes
    how: str
    sibling: tuple[str, bytes] | None = None


def load_seed(name: str, data: bytes) -> Seed:
    """A seed with its document parsed (a session file's JSON, a stream's lines)."""
    if name.endswith(".json.gz"):
        return Seed(name, data, json.loads(gzip.decompress(data)))
    lines = [json.loads(line) for line in data.splitlines() if line.strip()]
    return Seed(name, data, lines)


class Mutator:
    """Makes mutants of seeds, each from ``rng`` alone."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    # -- cases ------------------------------------------------------------------------------

    def mutant(self, seed: Seed, siblings: dict[str, bytes]) -> Mutant:
        """A mutant of ``seed``; ``siblings``: the intact files that may go beside it."""
        rng = self.rng
        if seed.is_snapshot:
            how, data = self._snapshot(seed)
        else:
            how, data = self._stream(seed)
        sibling = None
        stem = seed.name.removesuffix(".json.gz").removesuffix(".events.jsonl")
        other = f"{stem}.events.jsonl" if seed.is_snapshot else f"{stem}.json.gz"
        if other in siblings and rng.random() < 0.25:
            sibling = (other, siblings[other])
        return Mutant(seed.name, data, how, sibling)

    def _snapshot(self, seed: Seed) -> tuple[str, bytes]:
        rng = self.rng
        choice = rng.random()
        if choice < 0.08:
            return self.bytes_of(seed.data, "gzip bytes")
        if choice < 0.16:
            return self.gzip_container(seed.data)
        if choice < 0.3:
            how, text = self.bytes_of(gzip.decompress(seed.data), "json bytes")
            return how, self.gzipped(text)
        how, text = self.document(seed.document, same_kind=choice < KIND_SHARE)
        return how, self.gzipped(text)

    def _stream(self, seed: Seed) -> tuple[str, bytes]:
        rng = self.rng
        choice = rng.random()
        if choice < 0.15:
            return self.bytes_of(seed.data, "bytes")
        if choice < 0.3:
            return self.lines_of(seed.data)
        events = seed.document
        count = 1 + min(int(rng.expovariate(0.7)), 5)
        hows = []
        lines = [json.dumps(event, ensure_ascii=False).encode() for event in events]
        same_kind = choice < KIND_SHARE
        for _ in range(count):
            index = rng.randrange(len(events))
            how, text = self.document(events[index], same_kind)
            hows.append(f"line {index + 1}: {how}")
            lines[index] = text
        return "; ".join(hows), b"\n".join(lines) + b"\n"

    # -- bytes ------------------------------------------------------------------------------

    def bytes_of(self, data: bytes, what: str) -> tuple[str, bytes]:
        """``data`` with one to four byte-level mutations."""
        rng = self.rng
        buffer = bytearray(data)
        hows = []
        for _ in range(rng.choice((1, 1, 2, 3, 4))):
            if not buffer:
                break
            at = rng.randrange(len(buffer))
            kind = rng.randrange(6)
            if kind == 0:
                for _ in range(rng.randrange(1, 9)):
                    position = rng.randrange(len(buffer))
                    buffer[position] ^= 1 << rng.randrange(8)
                hows.append("bit flips")
            elif kind == 1:
                del buffer[at:]
                hows.append(f"cut at {at}")
            elif kind == 2:
                end = min(len(buffer), at + rng.randrange(1, 256))
                del buffer[at:end]
                hows.append(f"deleted {at}..{end}")
            elif kind == 3:
                end = min(len(buffer), at + rng.randrange(1, 512))
                buffer[at:at] = buffer[at:end] * rng.randrange(1, 4)
                hows.append(f"repeated {at}..{end}")
            else:
                token = rng.choice(BYTE_TOKENS)
                if kind == 4:
                    buffer[at : at + len(token)] = token
                else:
                    buffer[at:at] = token
                hows.append(f"{token[:8]!r} at {at}")
        return f"{what}: {', '.join(hows)}", bytes(buffer)

    def gzip_container(self, data: bytes) -> tuple[str, bytes]:
        """The gzip members of a session file split, truncated, emptied or followed by junk."""
        rng = self.rng
        text = gzip.decompress(data)
        kind = rng.randrange(5)
        if kind == 0:
            cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randrange(2, 40))))
            parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            return f"{len(parts)} members", b"".join(self.gzipped(p) for p in parts)
        if kind == 1:
            return "an empty member first", self.gzipped(b"") + data
        if kind == 2:
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            return "junk after the last member", data + junk
        if kind == 3:
            at = rng.randrange(len(data))
            return f"compressed bytes cut at {at}", data[:at]
        return "the member twice", data + data

    def lines_of(self, data: bytes) -> tuple[str, bytes]:
        """A stream's lines dropped, repeated, reordered, torn, joined or padded."""
        rng = self.rng
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        kind = rng.randrange(8)
        at = rng.randrange(len(lines))
        if kind == 0:
            del lines[at]
            how = f"line {at + 1} dropped"
        elif kind == 1:
            lines.insert(at, lines[rng.randrange(len(lines))])
            how = f"a line repeated at {at + 1}"
        elif kind == 2:
            rng.shuffle(lines)
            how = "lines shuffled"
        elif kind == 3:
            torn = lines[-1][: rng.randrange(len(lines[-1]))]
            return "torn last line", b"\n".join([*lines[:-1], torn])
        elif kind == 4:
            lines[at] = lines[at] + lines[(at + 1) % len(lines)]
            how = f"lines {at + 1} and {at + 2} joined"
        elif kind == 5:
            lines.insert(at, rng.choice(JUNK_LINES))
            how = f"a junk line at {at + 1}"
        elif kind == 6:
            return "CRLF line ends", b"\r\n".join(lines) + b"\r\n"
        else:
            return "a byte-order mark first", b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n"
        return how, b"\n".join(lines) + b"\n"

    @staticmethod
    def gzipped(data: bytes) -> bytes:
        return gzip.compress(data, compresslevel=1, mtime=0)

    # -- JSON values ------------------------------------------------------------------------

    def document(self, document: Any, same_kind: bool = False) -> tuple[str, bytes]:
        """``document`` with one to five value mutations (``same_kind``: of the same kind), as
        JSON text (``NaN`` and ``Infinity`` as Python writes them, deep nestings expanded)."""
        rng = self.rng
        mutated = copy.deepcopy(document)
        hows = []
        mutation = self.kind_mutation if same_kind else self.value_mutation
        for _ in range(1 + min(int(rng.expovariate(0.8)), 4)):
            mutated, how = mutation(mutated)
            hows.append(how)
        text = json.dumps(mutated, ensure_ascii=rng.random() < 0.5)
        return "; ".join(hows), expand_nesting(text).encode("utf-8", "surrogatepass")

    def value_mutation(self, document: Any) -> tuple[Any, str]:
        """One mutation somewhere in ``document`` (returned, since the root may be replaced)."""
        rng = self.rng
        slots = list(_slots(document))
        if not slots:
            return rng.choice(INTERESTING), "root replaced"
        container, key, path = rng.choice(slots)
        value = container[key]
        operations: list[Callable[[], str]] = [
            lambda: self._replace(container, key),
            lambda: self._replace(container, key),
            lambda: self._number(container, key, value),
            lambda: self._wrap(container, key, value),
            lambda: self._nest(container, key, value),
            lambda: self._delete(container, key),
            lambda: self._delete(container, key),
            lambda: self._copy_from(document, container, key),
            lambda: self._odd_id(container, key, value),
        ]
        if isinstance(key, str) and _ID_KEY.search(key):
            operations += [
                lambda: self._odd_id(container, key, value),
                lambda: self._traversal(container, key),
                lambda: self._duplicate_id(document, container, key),
            ]
        if isinstance(container, list):
            operations.append(lambda: self._repeat(container, key))
        how = rng.choice(operations)()
        return document, f"{path}: {how}"

    def kind_mutation(self, document: Any) -> tuple[Any, str]:
        """One mutation somewhere in ``document`` that keeps the kind of what it changes: the
        schema mostly still accepts the file, and the views get values no recording has."""
        rng = self.rng
        slots = list(_slots(document))
        if not slots:
            return document, "nothing to change"
        container, key, path = rng.choice(slots)
        value = container[key]
        operations: list[Callable[[], str]] = [
            lambda: self._same_place(document, container, key, path),
            lambda: self._same_kind(container, key, value),
        ]
        if isinstance(value, list) and len(value) > 1:
            operations.append(lambda: self._items(value))
        how = rng.choice(operations)()
        return document, f"{path}: {how}"

    def _same_place(self, document: Any, container: Any, key: Any, path: str) -> str:
        """The value of another node's same field (``$.runs[1].turns[0].id`` for
        ``$.runs[0].turns[2].id``): its id, label or subtree, of the right shape."""
        place = _place(path)
        others = [p for _, _, p in _slots(document) if p != path and _place(p) == place]
        if not others:
            return self._same_kind(container, key, container[key])
        source = self.rng.choice(others)
        container[key] = copy.deepcopy(_at(document, source))
        return f"= the value at {source}"

    def _same_kind(self, container: Any, key: Any, value: Any) -> str:
        rng = self.rng
        if isinstance(value, bool):
            container[key] = not value
        elif isinstance(value, int):
            container[key] = rng.choice((value + 1, value * 2, max(value // 2, 1), 2**31))
        elif isinstance(value, float):
            container[key] = rng.choice((-value, value * 1e6, 0.0, -0.0, 5e-324, 1e308))
        elif isinstance(value, str) and isinstance(key, str) and _FREE_TEXT.search(key):
            odd = rng.choice(ODD_TEXTS)
            container[key] = rng.choice((odd, value + odd, odd + value))
        elif isinstance(value, str):  # an id, label, time: a digit changed keeps its pattern
            digits = [i for i, c in enumerate(value) if c in "123456789"]
            if digits:
                at = rng.choice(digits)
                container[key] = value[:at] + rng.choice("123456789") + value[at + 1 :]
        elif isinstance(value, list) and value:
            return self._items(value)
        return f"= {_short(container[key])}"

    def _items(self, items: list[Any]) -> str:
        rng = self.rng
        kind = rng.randrange(3)
        at = rng.randrange(len(items))
        if kind == 0:
            del items[at]
            return f"item {at} dropped"
        if kind == 1:
            items.insert(at, copy.deepcopy(items[rng.randrange(len(items))]))
            return f"an item repeated at {at}"
        items.reverse()
        return "items reversed"

    def _replace(self, container: Any, key: Any) -> str:
        container[key] = copy.deepcopy(self.rng.choice(INTERESTING))
        return f"= {_short(container[key])}"

    def _number(self, container: Any, key: Any, value: Any) -> str:
        rng = self.rng
        options: list[Any] = [math.nan, math.inf, -math.inf, 2**64, -(2**63) - 1, 10**400]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 2**53:
            options += [-value, value * 10**12, value + 0.5]
        container[key] = rng.choice(options)
        return f"= {_short(container[key])}"

    def _wrap(self, container: Any, key: Any, value: Any) -> str:
        wrapped = self.rng.choice(([value], {"value": value}, [value, value], json.dumps(value)))
        container[key] = wrapped
        return f"wrapped as {type(wrapped).__name__}"

    def _nest(self, container: Any, key: Any, value: Any) -> str:
        depth = self.rng.choice((30, 200, 600, 900, 990, 1500, 5000, 100_000))
        opener = self.rng.choice("[{")
        container[key] = f"{NEST}{depth}{opener}"
        return f"nested {depth} deep in {opener}"

    def _delete(self, container: Any, key: Any) -> str:
        del container[key]
        return "deleted"

    def _copy_from(self, document: Any, container: Any, key: Any) -> str:
        slots = list(_slots(document))
        source, source_key, path = self.rng.choice(slots)
        container[key] = copy.deepcopy(source[source_key])
        return f"= copy of {path}"

    def _odd_id(self, container: Any, key: Any, value: Any) -> str:
        rng = self.rng
        prefix = rng.choice(("msg_", "agent_", ""))
        if isinstance(value, str):
            prefix = value.rstrip("0123456789") or prefix
        container[key] = prefix + rng.choice(ODD_DIGITS)
        return f"= {_short(container[key])}"

    def _traversal(self, container: Any, key: Any) -> str:
        container[key] = self.rng.choice(TRAVERSAL)
        return f"= {container[key]!r}"

    def _duplicate_id(self, document: Any, container: Any, key: Any) -> str:
        ids = [
            source[k]
            for source, k, _ in _slots(document)
            if isinstance(k, str) and _ID_KEY.search(k) and isinstance(source[k], str)
        ]
        if ids:
            container[key] = self.rng.choice(ids)
        return f"= {_short(container[key])} (another's id)"

    def _repeat(self, container: list[Any], key: int) -> str:
        container.insert(key, copy.deepcopy(container[key]))
        return "repeated"


_INDEX = re.compile(r"\[\d+\]")


def _place(path: str) -> str:
    """Where ``path`` is, as far as its kind goes: its last two keys, indices left out."""
    return ".".join(_INDEX.sub("", path).split(".")[-2:])


def _at(document: Any, path: str) -> Any:
    return next(c[k] for c, k, p in _slots(document) if p == path)


def _slots(value: Any, path: str = "$") -> Any:
    """(container, key, path) of every value inside ``value``, depth first."""
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}"
            yield value, key, where
            yield from _slots(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            yield value, index, where
            yield from _slots(item, where)


def expand_nesting(text: str) -> str:
    """``text`` (JSON) with each :data:`NEST` token written out as the nesting it stands for."""

    def nested(match: re.Match[str]) -> str:
        depth, opener = int(match.group(1)), match.group(2)
        if opener == "[":
            return "[" * depth + "0" + "]" * depth
        return '{"a":' * depth + "0" + "}" * depth

    return _NEST_TOKEN.sub(nested, text)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def decompressed_size(data: bytes, limit: int = 256 << 20) -> int:
    """How many bytes ``data`` holds once un-gzipped (all members, up to ``limit``); its own
    size if it is not gzip."""
    if data[:2] != b"\x1f\x8b":
        return len(data)
    total = 0
    rest = data
    try:
        while rest[:2] == b"\x1f\x8b" and total < limit:
            decompressor = zlib.decompressobj(31)
            total += len(decompressor.decompress(rest, limit - total))
            if not decompressor.eof:
                break
            rest = decompressor.unused_data
    except zlib.error:
        pass
    return max(total, len(data))
