"""The performance figures the documentation quotes, taken from the benchmarks' saved results.

Each benchmark run with ``--save`` (``make bench`` does) writes ``benchmarks/results/NAME.json``:
its tables, already formatted as the pages show them, with the machine, Python and date of the
run. This script writes each table into the pages (docs/performance.md shows them all; the README
and other pages show an excerpt) between ``<!-- figures: NAME.TABLE -->`` and
``<!-- /figures -->``, so the figures the documentation quotes are the last full run's, never
typed by hand; ``--check`` says whether the pages hold them (tests/test_performance_figures.py
makes the same check). An excerpt (``EXCERPTS``) is a few rows of a saved table, picked by their
first cell, so it changes with the run it comes from.

    python benchmarks/figures.py            # rewrite the pages' figures from the results
    python benchmarks/figures.py --check    # exit 1 if a page differs from the results
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
# The page that shows every table (the site's "Performance", in its explanation section).
PAGE = ROOT / "docs" / "performance.md"
# Every page with a figures region: PAGE, and those that quote an excerpt of it.
PAGES = (PAGE, ROOT / "README.md", ROOT / "docs" / "journal.md", ROOT / "docs" / "session-file.md")
_REGION = re.compile(
    r"(<!-- figures: (?P<name>[\w.]+) -->\n)(?P<body>.*?)(<!-- /figures -->)", re.DOTALL
)

Table = dict[str, Any]
"""``{"headers": [...], "rows": [[cell, ...], ...]}``, every cell a string as printed."""


def save(path: Path, benchmark: str, tables: dict[str, Table], **extra: Any) -> None:
    """Write a benchmark's ``tables`` to ``path``, with what the run was made on."""
    document = {
        "benchmark": benchmark,
        "tables": tables,
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, {platform.system()}",
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        **extra,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def render(table: Table) -> str:
    """A table as a Markdown table (``|`` in a cell escaped)."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    headers = list(table["headers"])
    lines = [line(headers), "|" + "---|" * len(headers)]
    lines += [line([str(cell) for cell in row]) for row in table["rows"]]
    return "\n".join(lines) + "\n"


def tables(results: Path = RESULTS) -> dict[str, Table]:
    """Every saved table, by ``NAME.TABLE`` (NAME: the results file's name)."""
    found: dict[str, Table] = {}
    for path in sorted(results.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        for name, table in document["tables"].items():
            found[f"{path.stem}.{name}"] = table
    return found


_PER_CALL = "bench_overhead.per_call"
_PURE, _EFFECT = (
    "tool call declared pure",
    "undeclared (effect) tool call, intent on disk before its body",
)
_SHARE = "the journal's share"

# Excerpts by name: (the saved table, its headers, its rows as one cell of text then the first
# cells of the saved rows whose columns fill the rest). Cells of a row picked are its figure,
# then its ratio and target where it has them.
EXCERPTS: dict[str, tuple[str, list[str], list[tuple[str, list[str]]]]] = {
    # The README's: what a tool call costs against a bare span, and the journal's part of an
    # undeclared one against a plain os.write of the same lines.
    "bench_overhead.readme": (
        _PER_CALL,
        ["per tool call, one run", "caller's thread", "in total"],
        [
            ("declared `pure`, vs a bare span", [f"{_PURE}, caller", f"{_PURE}, total"]),
            ("undeclared (`effect`), vs a bare span", [f"{_EFFECT}, caller", f"{_EFFECT}, total"]),
            (
                "the journal's share of it (effect less pure), vs an `os.write` of the same lines",
                [f"{_SHARE} (undeclared less pure), caller", f"{_SHARE}, total"],
            ),
        ],
    ),
    # docs/journal.md's: the journal's rows of the per-call table (they have no target).
    "bench_overhead.journal": (
        _PER_CALL,
        [],
        [
            ("", ["plain os.write of its intent line"]),
            ("", ["plain os.write of its intent and done lines"]),
            ("", [f"{_SHARE} (undeclared less pure), caller"]),
            ("", [f"{_SHARE}, total"]),
        ],
    ),
}


def _row(table: Table, first: str, source: str) -> list[str]:
    """The row of ``table`` whose first cell is ``first``, or starts with it then `` (``."""
    for row in table["rows"]:
        if row[0] == first or row[0].startswith(first + " ("):
            return [str(cell) for cell in row]
    raise KeyError(f"{source} has no row {first!r}: the excerpt must follow the benchmark's rows")


def _quoted(row: list[str]) -> str:
    """A picked row's figures as one cell: ``figure = ratio (target ...)``, each where given."""
    figure, ratio, target = row[1], row[2], row[3] if len(row) > 3 else ""
    text = f"{ratio} ({figure})" if ratio else figure
    return f"{text}, target {target}" if target else text


def excerpts(saved: dict[str, Table]) -> dict[str, Table]:
    """The tables of ``EXCERPTS``, made from ``saved``."""
    made: dict[str, Table] = {}
    for name, (source, headers, rows) in EXCERPTS.items():
        if source not in saved:
            continue
        table = saved[source]
        if not headers:  # rows copied, without the target and met columns
            picked = [_row(table, firsts[0], source)[:3] for _, firsts in rows]
            made[name] = {"headers": table["headers"][:3], "rows": picked}
            continue
        made[name] = {
            "headers": headers,
            "rows": [
                [label] + [_quoted(_row(table, first, source)) for first in firsts]
                for label, firsts in rows
            ],
        }
    return made


def updated(text: str, saved: dict[str, Table], page: Path = PAGE) -> str:
    """``text`` (``page``) with each figures region holding its saved table or excerpt."""
    shown = {**saved, **excerpts(saved)}

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in shown:
            raise KeyError(f"{page.name} asks for figures {name!r}, which no results file holds")
        return match.group(1) + render(shown[name]) + match.group(4)

    return _REGION.sub(fill, text)


def regions(text: str) -> list[str]:
    """The names of the figures regions in ``text``."""
    return [match.group("name") for match in _REGION.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 on a difference")
    args = parser.parse_args(argv)
    saved, differ = tables(), 0
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        new = updated(text, saved, page)
        relative = page.relative_to(ROOT)
        if args.check:
            if new != text:
                print(f"{relative}'s figures differ from benchmarks/results/", file=sys.stderr)
                differ = 1
            continue
        if new != text:
            page.write_text(new, encoding="utf-8")
        print(
            f"{relative}: {len(regions(new))} tables of figures from {RESULTS.relative_to(ROOT)}/"
        )
    return differ


if __name__ == "__main__":
    sys.exit(main())
