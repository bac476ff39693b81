"""The performance figures of docs/performance.md, taken from the benchmarks' saved results.

Each benchmark run with ``--save`` (``make bench`` does) writes ``benchmarks/results/NAME.json``:
its tables, already formatted as the page shows them, with the machine, Python and date of the
run. This script writes each table into docs/performance.md between
``<!-- figures: NAME.TABLE -->`` and ``<!-- /figures -->``, so the figures the documentation
quotes are the last full run's, never typed by hand; ``--check`` says whether the page holds them
(tests/test_performance_figures.py makes the same check).

    python benchmarks/figures.py            # rewrite the page's figures from the results
    python benchmarks/figures.py --check    # exit 1 if the page differs from the results
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
# The page that shows the figures (the site's "Performance", in its explanation section).
PAGE = ROOT / "docs" / "performance.md"
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


def updated(text: str, saved: dict[str, Table]) -> str:
    """``text`` (the page) with each figures region holding its saved table."""

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in saved:
            raise KeyError(f"{PAGE.name} asks for figures {name!r}, which no results file holds")
        return match.group(1) + render(saved[name]) + match.group(4)

    return _REGION.sub(fill, text)


def regions(text: str) -> list[str]:
    """The names of the figures regions in ``text``."""
    return [match.group("name") for match in _REGION.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 on a difference")
    args = parser.parse_args(argv)
    text = PAGE.read_text(encoding="utf-8")
    new = updated(text, tables())
    if args.check:
        if new != text:
            print(f"{PAGE.name}'s figures differ from benchmarks/results/", file=sys.stderr)
            return 1
        return 0
    if new != text:
        PAGE.write_text(new, encoding="utf-8")
    page, results = PAGE.relative_to(ROOT), RESULTS.relative_to(ROOT)
    print(f"{page}: {len(regions(new))} tables of figures from {results}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
