"""`agenttrace diff A B --html FILE` and `agenttrace.views.diff.to_html`: two runs side by side
on one self-contained page, the first divergence marked.

The runs are tests/test_diff.py's weather agent, recorded for real on the scripted model: one
that inserts a tool call (steps in one run only), and a long one (a hundred lookups) whose last
reply differs, with markup and a long line in it. The page is read with the standard library's
HTML parser, and opened in headless Chromium (Debian's package) as a user would open it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

import agenttrace
from agenttrace.views.diff import to_html
from agenttrace.views.diff.compare import MAX_VALUE_CHARS
from agenttrace.views.diff.html import COLUMNS, SIDE_COLUMNS

from .chromium import Chromium
from .test_cli import ok, one_error_line
from .test_diff import SCRIPT, SUNNY, baseline, cli, record, weather_agent

__all__ = ["baseline"]  # test_diff's fixture, used here

LOOKUPS = 100
"""Lookups in the long run: some three hundred steps, the divergence at the end."""
HOSTILE = (
    "<script>document.documentElement.dataset.pwned = '1'</script>\n"
    "<img src=x onerror=\"document.documentElement.dataset.pwned = '2'\">\n"
    "It is " + "very " * 400 + "sunny."
)


@dataclass
class Element:
    """An element of the page: its tag, attributes, text (its own and its children's) and
    children."""

    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: str = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def walk(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, tag: str, *classes: str) -> list[Element]:
        return [e for e in self.walk() if e.tag == tag and set(classes) <= e.classes]


VOID = {"meta", "br", "img", "input", "link", "hr", "col"}


class _Page(HTMLParser):
    """The page as a tree of :class:`Element` (text gathered into every open element)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.open[-1].children.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.open) - 1, 0, -1):
            if self.open[index].tag == tag:
                del self.open[index:]
                return

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.text += data


def parse(page: str) -> Element:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser.root


def step_rows(page: Element) -> list[Element]:
    return page.find("tr", "step")


def cells(row: Element) -> list[Element]:
    return [child for child in row.children if child.tag == "td"]


@pytest.fixture(scope="module")
def noted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The weather agent with a ``note`` call before its lookup: a step only in this run."""
    return record(tmp_path_factory.mktemp("noted"), weather_agent(insert_note=True))


@pytest.fixture(scope="module")
def long_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A hundred lookups, then the sunny reply in A and a hostile, long one in B."""
    lookups = [SCRIPT[0]] * LOOKUPS
    a = record(tmp_path_factory.mktemp("long-a"), script=[*lookups, {"text": SUNNY}])
    b = record(tmp_path_factory.mktemp("long-b"), script=[*lookups, {"text": HOSTILE}])
    return a, b


def test_the_divergence_row_is_marked_with_its_field_diff(
    long_pair: tuple[Path, Path],
) -> None:
    diff = agenttrace.diff_runs(*long_pair)
    page = parse(to_html(diff))
    rows = step_rows(page)
    assert len(rows) == len(diff.steps) > 3 * LOOKUPS  # every step, in run order
    (marked,) = [row for row in rows if "divergence" in row.classes]
    assert marked.attrs["id"] == "divergence"
    assert len([e for e in page.walk() if e.attrs.get("id") == "divergence"]) == 1
    last = f"{LOOKUPS + 1}.1"
    a, differs, b = cells(marked)[0], cells(marked)[SIDE_COLUMNS], cells(marked)[SIDE_COLUMNS + 1]
    assert (a.text, b.text, differs.text) == (last, last, "response")
    # The banner at the top says what diverged and links to the row.
    (banner,) = page.find("div", "banner-diverged")
    (link,) = banner.find("a")
    assert link.attrs["href"] == "#divergence"
    assert link.text == f"response at A {last} / B {last}: llm claude-sonnet-4-5-20250929"
    # Right under the row: its field diff, A's value and B's, and the lines that differ.
    assert rows.index(marked) == len(rows) - 1  # the last reply
    (detail,) = page.find("tr", "divergence-detail")
    body = page.find("tbody")[0].children
    assert body[body.index(marked) + 1] is detail
    (changes,) = detail.find("table", "changes")
    path, value_a, value_b = changes.find("tbody")[0].children[0].children
    assert (path.text, value_a.text) == ("$[0].content", SUNNY)
    assert value_b.text.startswith("<script>document.documentElement")
    (text_diff,) = detail.find("pre", "text-diff")
    added = [line.text for line in text_diff.find("span", "add")]
    assert added[:2] == ["+" + line for line in HOSTILE.split("\n")[:2]]


def test_both_runs_side_by_side_and_steps_in_one_run_only(baseline: Path, noted: Path) -> None:
    diff = agenttrace.diff_runs(baseline, noted)
    page = parse(to_html(diff))
    head = page.find("th", "run-head")
    assert [th.text.split(":")[0] for th in head] == ["A", "B"]
    assert [th.attrs["colspan"] for th in head] == [str(SIDE_COLUMNS)] * 2
    rows = step_rows(page)
    (only,) = [row for row in rows if "only-b" in row.classes]
    # A's side is one empty cell across; B's has the step.
    empty, differs, *b = cells(only)
    assert "absent" in empty.classes and empty.attrs["colspan"] == str(SIDE_COLUMNS)
    assert differs.text == "only in B" and (b[0].text, len(b)) == ("1.2", SIDE_COLUMNS)
    assert "note" in b[1].text
    assert "divergence" in only.classes  # the first divergence: a step in one run only
    # The field diff there: the step is absent in A.
    (detail,) = page.find("tr", "divergence-detail")
    assert "(absent)" in detail.text
    # Paired rows have every cell of both runs; lookup is 1.2 in A, 1.3 in B.
    paired = [row for row in rows if not row.classes & {"only-a", "only-b"}]
    assert all(len(cells(row)) == COLUMNS for row in paired)
    lookup = [row for row in paired if cells(row)[0].text == "1.2"]
    assert cells(lookup[0])[SIDE_COLUMNS + 1].text == "1.3"
    assert [row for row in rows if "only-a" in row.classes] == []


def test_hostile_text_is_shown_as_text_and_long_text_is_cut_with_a_note(
    long_pair: tuple[Path, Path],
) -> None:
    text = to_html(agenttrace.diff_runs(*long_pair))
    page = parse(text)
    tags = {element.tag for element in page.walk()}
    assert "script" not in tags and "img" not in tags  # the reply's markup is no markup
    assert "&lt;script&gt;document.documentElement.dataset.pwned" in text
    assert "<script" not in text.lower()
    (_, value_b) = page.find("tr", "divergence-detail")[0].find("pre")[:2]
    assert value_b.text.endswith("…") and len(value_b.text) == MAX_VALUE_CHARS + 1
    notes = [note.text for note in page.find("span", "cut")]
    assert notes == [f"cut at {MAX_VALUE_CHARS} characters"]  # B's only: A's is short
    # The page loads nothing and runs nothing: its policy allows its one style, by hash.
    (policy,) = [e for e in page.find("meta") if e.attrs.get("http-equiv")]
    assert policy.attrs["content"].startswith("default-src 'none'; style-src 'sha256-")
    assert "http" not in text.replace("http-equiv", "")


def test_past_max_rows_the_steps_are_counted_and_the_divergence_still_listed(
    long_pair: tuple[Path, Path],
) -> None:
    diff = agenttrace.diff_runs(*long_pair)
    page = parse(to_html(diff, max_rows=10))
    rows = step_rows(page)
    assert [cells(row)[0].text for row in rows[:3]] == ["0", "1", "1.1"]
    assert len(rows) == 11 and "divergence" in rows[-1].classes  # ten, then the divergence's
    gaps = [row.text for row in page.find("tr", "gap")]
    skipped = len(diff.steps) - 11
    assert gaps == [f"{skipped} more step(s) not listed (agenttrace diff --json lists every one)"]
    (link,) = page.find("div", "banner-diverged")[0].find("a")
    assert link.attrs["href"] == "#divergence"


def test_two_runs_that_did_the_same_say_so(baseline: Path) -> None:
    page = parse(to_html(agenttrace.diff_runs(baseline, baseline)))
    (banner,) = page.find("p", "banner-same")
    assert banner.text.startswith("Same: no divergence")
    assert not [e for e in page.walk() if e.attrs.get("id") == "divergence"]
    assert not [row for row in step_rows(page) if row.classes & {"changed", "divergence"}]


def test_the_command_writes_the_page(baseline: Path, noted: Path, tmp_path: Path) -> None:
    written = tmp_path / "diff.html"
    result = cli(str(baseline), str(noted), "--json", "--html", str(written))
    assert result.returncode == 1, result.stderr  # they differ, as without --html
    assert result.stderr == f"wrote {written}\n"
    assert '"first_divergence"' in result.stdout  # the report is printed all the same
    page = written.read_text(encoding="utf-8")
    assert page == to_html(agenttrace.diff_runs(baseline, noted))
    same = tmp_path / "same.html"
    assert "same: no divergence" in ok(cli(str(baseline), str(baseline), "--html", str(same)))
    assert 'class="banner banner-same"' in same.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("where", "says"),
    [("missing/diff.html", "cannot write: No such file or directory"), (".", "is a directory")],
)
def test_a_page_that_cannot_be_written_is_one_line_and_exit_2(
    baseline: Path, tmp_path: Path, where: str, says: str
) -> None:
    target = tmp_path / where
    line = one_error_line(cli(str(baseline), str(baseline), "--html", str(target)))
    assert line == f"{target}: {says}"


@pytest.mark.e2e
def test_chromium_opens_the_page_at_the_marked_divergence(
    long_pair: tuple[Path, Path], browser: Chromium, tmp_path: Path
) -> None:
    """Opened from the disk at ``#divergence``: the row is on screen, under the sticky column
    heads, not hidden by them; coloured as the banner; the hostile reply did nothing."""
    page = tmp_path / "diff.html"
    page.write_text(to_html(agenttrace.diff_runs(*long_pair)), encoding="utf-8")
    browser.open(page.as_uri() + "#divergence")
    browser.wait_for(
        "document.readyState === 'complete' && window.scrollY > 0", "the page scrolled"
    )
    seen = browser.evaluate(
        """(() => {
        const row = document.getElementById('divergence');
        const box = row.getBoundingClientRect();
        const hit = document.elementFromPoint(box.left + 20, box.top + box.height / 2);
        const other = document.querySelector('tr.step:not(.divergence):not(.changed) > td');
        const a = row.cells[0].getBoundingClientRect();
        const b = row.cells[row.cells.length - 7].getBoundingClientRect();
        return {
          onScreen: box.top >= 0 && box.bottom <= window.innerHeight,
          hitRow: hit !== null && row.contains(hit),
          rowColour: getComputedStyle(row.cells[0]).backgroundColor,
          bannerColour: getComputedStyle(document.getElementById('verdict')).backgroundColor,
          otherColour: getComputedStyle(other).backgroundColor,
          aLeftOfB: a.right <= b.left,
          pwned: document.documentElement.dataset.pwned || null,
          scripts: document.scripts.length,
        };
    })()"""
    )
    assert seen["onScreen"] and seen["hitRow"], seen
    assert seen["rowColour"] == seen["bannerColour"] != seen["otherColour"], seen
    assert seen["aLeftOfB"] and seen["pwned"] is None and seen["scripts"] == 0, seen
    assert browser.console == []  # no policy refusal: the inline style is the one allowed
    # A screenshot that has something on it (looked at by eye when this test was written).
    png = browser.screenshot(tmp_path / "diff.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 40_000, len(png)
