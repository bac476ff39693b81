"""The README's performance figures, taken from the benchmarks' saved results.

Each benchmark run with ``--save`` (``make bench`` does) writes ``benchmarks/results/NAME.json``:
its tables, already formatted as the README shows them, with the machine, Python and date of the
run. This script writes each table into README.md between ``<!-- figures: NAME.TABLE -->`` and
``<!-- /figures -->``, so the figures the README quotes are the last full run's, never typed by
hand; ``--check`` says whether the README holds them (tests/test_readme.py runs that check).

    python benchmarks/figures.py            # rewrite the README's figures from the results
    python benchmarks/figures.py --check    # exit 1 if the README differs from the results
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
README = ROOT / "README.md"
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
    """``text`` (the README) with each figures region holding its saved table."""

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in saved:
            raise KeyError(f"README.md asks for figures {name!r}, which no results file holds")
        return match.group(1) + render(saved[name]) + match.group(4)

    return _REGION.sub(fill, text)


def regions(text: str) -> list[str]:
    """The names of the figures regions in ``text``."""
    return [match.group("name") for match in _REGION.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 on a difference")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    new = updated(text, tables())
    if args.check:
        if new != text:
            print("README.md's figures differ from benchmarks/results/", file=sys.stderr)
            return 1
        return 0
    if new != text:
        README.write_text(new, encoding="utf-8")
    print(f"README.md: {len(regions(new))} tables of figures from benchmarks/results/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
