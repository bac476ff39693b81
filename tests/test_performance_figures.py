"""The performance figures docs/performance.md quotes are the benchmarks' own: each table between
``<!-- figures: NAME.TABLE -->`` and ``<!-- /figures -->`` is what the last full ``make bench``
saved in ``benchmarks/results/`` (written there by ``benchmarks/figures.py``, never by hand)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from .helpers import ROOT


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures", ROOT / "benchmarks" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_performance_page_quotes_the_saved_benchmark_results() -> None:
    figures = _figures()
    assert figures.PAGE == ROOT / "docs" / "performance.md"
    page = figures.PAGE.read_text(encoding="utf-8")
    saved = figures.tables()
    shown = figures.regions(page)
    assert saved and shown, "no saved benchmark tables, or none shown on the performance page"
    assert sorted(shown) == sorted(saved), "every saved table is shown once, and only those"
    assert figures.updated(page, saved) == page, (
        "docs/performance.md's figures differ from benchmarks/results/: run `make bench` (or "
        "`python benchmarks/figures.py` after editing a results file's format)"
    )
