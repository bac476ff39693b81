"""The seeds the mutations start from, each with its share of the cases.

Real files made by agenttrace: the demo's session file and stream (tests/fuzz/seeds/, made by
``python -m tests.fuzz.make_seeds``), the two files the demo left when it was killed inside
``discuss`` (``crashed.*``: a session file written mid-run, and a stream with ``op_accounted``
lines past it; made by tests/crash_child.py's ``first ... jill``), and the event streams of the
seed's examples (tests/data/), one in the older spelling, as streams and one as a session file
without runs. The demo's four files hold the step journal (the session file's ``journal``
array, the stream's ``step`` lines; the killed demo's with a run to re-enter and a call in
doubt), so every mutation reaches its lines as it reaches the others; the examples hold none,
as files of earlier releases.
"""

from __future__ import annotations

import json
from pathlib import Path

from agenttrace.formats.session.files import snapshot_bytes

from .mutate import Seed, load_seed

SEEDS = Path(__file__).resolve().parent / "seeds"
DATA = Path(__file__).resolve().parent.parent / "data"


def _lines(events: list[dict[str, object]]) -> list[bytes]:
    return [(json.dumps(event) + "\n").encode() for event in events]


def corpus() -> tuple[list[Seed], list[float], dict[str, bytes]]:
    """(seeds, their weights, the files a mutant may find beside it, by name)."""
    files = {path.name: path.read_bytes() for path in sorted(SEEDS.iterdir())}
    files["example0.events.jsonl"] = (DATA / "seed000_example1.jsonl").read_bytes()
    examples = json.loads((DATA / "seed001_examples.json").read_text())["examples"]
    for number, example in examples.items():
        files[f"example{number}.events.jsonl"] = b"".join(_lines(example["events"]))
    files["example1.json.gz"] = snapshot_bytes(
        "example1", [], _lines(examples["1"]["events"]), {"createdAt": 1700000000000}
    )
    weights = {
        "cafe.json.gz": 0.25,
        "cafe.events.jsonl": 0.15,
        "crashed.json.gz": 0.1,
        "crashed.events.jsonl": 0.1,
        "example0.events.jsonl": 0.1,
        "example1.json.gz": 0.1,
        "example1.events.jsonl": 0.05,
        "example2.events.jsonl": 0.05,
        "example3.events.jsonl": 0.05,
        "example4.events.jsonl": 0.05,
    }
    seeds = [load_seed(name, files[name]) for name in weights]
    # Only the demo's two files, and the two a killed demo left, are halves of one session.
    siblings = {
        name: files[name]
        for name in ("cafe.json.gz", "cafe.events.jsonl", "crashed.json.gz", "crashed.events.jsonl")
    }
    return seeds, list(weights.values()), siblings
