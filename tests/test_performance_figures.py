"""The performance figures the documentation quotes are the benchmarks' own: each table between
``<!-- figures: NAME.TABLE -->`` and ``<!-- /figures -->`` is what the last full ``make bench``
saved in ``benchmarks/results/``, or an excerpt of it (written there by
``benchmarks/figures.py``, never by hand): docs/performance.md shows every saved table, the README
and the pages that quote a few rows show their excerpts."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from .helpers import ROOT


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures", ROOT / "benchmarks" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_performance_page_shows_every_saved_table_once() -> None:
    figures = _figures()
    assert figures.PAGE == ROOT / "docs" / "performance.md"
    saved = figures.tables()
    shown = figures.regions(figures.PAGE.read_text(encoding="utf-8"))
    assert saved and shown, "no saved benchmark tables, or none shown on the performance page"
    assert sorted(shown) == sorted(saved), "every saved table is shown once, and only those"


def test_the_readme_quotes_the_journal_s_cost_against_a_plain_write() -> None:
    figures = _figures()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert figures.regions(readme) == ["bench_overhead.readme"]
    excerpt = figures.excerpts(figures.tables())["bench_overhead.readme"]
    rows = {row[0]: row[1:] for row in excerpt["rows"]}
    assert len(rows) == 3, "the README's table stays short: pure, effect, the journal's share"
    share = next(cells for label, cells in rows.items() if "os.write" in label)
    assert all("the os.write" in cell for cell in share), "the share is a ratio to the os.write"
    assert figures.render(excerpt) in readme


@pytest.mark.parametrize("name", ["performance.md", "README.md", "journal.md", "session-file.md"])
def test_each_page_holds_what_figures_py_makes_from_the_saved_results(name: str) -> None:
    figures = _figures()
    (page,) = [page for page in figures.PAGES if page.name == name]
    text = page.read_text(encoding="utf-8")
    assert figures.regions(text), f"{name} has no figures region"
    assert figures.updated(text, figures.tables(), page) == text, (
        f"{name}'s figures differ from benchmarks/results/: run `make bench` (or "
        "`python benchmarks/figures.py` after editing a results file's format or an excerpt)"
    )


def test_an_excerpt_of_a_row_the_benchmark_no_longer_makes_fails_loudly() -> None:
    figures = _figures()
    saved = figures.tables()
    renamed = {**saved, "bench_overhead.per_call": {"headers": ["measurement"], "rows": [["x"]]}}
    with pytest.raises(KeyError, match="has no row"):
        figures.excerpts(renamed)
