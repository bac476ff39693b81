"""A :class:`~agenttrace.views.diff.result.RunDiff` as one self-contained HTML page
(``agenttrace diff A B --html FILE``): run A on the left and run B on the right, a row per
step, the first divergence marked (``#divergence``, a banner at the top linking to it) with its
field-level diff under it.

The page is static: built here, with no script at all, so it reads the same with JavaScript
off. It loads nothing either: its Content-Security-Policy allows only its one inline
``<style>`` (by hash) and no network, so it opens from a disk, a mail or a bug report. The
styles are the session export's (``agenttrace export --format html``, page.css) followed by
this page's own (``page/diff.css``); the markup is ``page/diff.html``, a
:class:`string.Template` filled in one pass, every text in it escaped with :func:`html.escape`
here (a name or message holding ``<script>`` is shown as that text).

Bounded whatever the runs hold: the values of the field diff are those the diff keeps (secrets
replaced, capped at :data:`~agenttrace.views.diff.compare.MAX_VALUE_CHARS` characters, which a
note says), each shown up to :data:`MAX_TEXT_CHARS` characters with a note saying how
much is left out, and at most :data:`MAX_ROWS` steps are listed (the divergence's always).
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Iterator
from importlib import resources
from string import Template
from typing import Any

from agenttrace._version import __version__
from agenttrace.views.diff.compare import MAX_VALUE_CHARS, Change, was_cut
from agenttrace.views.diff.render import differs_text, divergence_text, number, ref_text
from agenttrace.views.diff.result import USAGE_FIELDS, Divergence, RunDiff, RunRef, StepDiff
from agenttrace.views.exports.html import STYLE_FILE, csp_hash, page_file, writable

PAGE_DIRECTORY = "page"
TEMPLATE_FILE = "diff.html"
STYLE_FILE_OWN = "diff.css"

MAX_TEXT_CHARS = 4000
"""A value or name is shown up to this many characters, then a note says how many more."""
MAX_ROWS = 2000
"""Steps listed; the rest are counted in a row (``agenttrace diff --json`` has every one)."""
MAX_DEPTH_CLASS = 8
"""Deepest indentation drawn (``depth-N`` in diff.css); deeper steps are drawn at it."""

HEADINGS = {"input_tokens": "in", "output_tokens": "out", "cost_usd": "cost $", "latency_ms": "ms"}
SIDE_COLUMNS = 3 + len(USAGE_FIELDS)
"""Per run: label, step, status and a column per usage field."""
COLUMNS = 2 * SIDE_COLUMNS + 1
"""Both runs and, between them, what differs."""


@functools.cache
def _page() -> tuple[Template, str, str]:
    """The template, the ``<style>`` text and the policy (escaped for its attribute)."""
    here = resources.files(__name__.rpartition(".")[0]) / PAGE_DIRECTORY
    style = "\n" + page_file(STYLE_FILE) + (here / STYLE_FILE_OWN).read_text(encoding="utf-8")
    policy = "; ".join(
        (
            "default-src 'none'",  # no script, no fetch, no frame: only the style below
            f"style-src '{csp_hash(style)}'",
            "img-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        )
    )
    template = Template((here / TEMPLATE_FILE).read_text(encoding="utf-8"))
    return template, style, html.escape(policy, quote=False).replace('"', "&quot;")


def to_html(diff: RunDiff, max_rows: int = MAX_ROWS) -> str:
    """``diff`` (from :func:`agenttrace.diff_runs`) as one HTML page that needs no network,
    listing at most ``max_rows`` steps (and the divergence's, wherever it is)."""
    template, style, policy = _page()
    title = f"agenttrace diff: {_run(diff.a)} vs {_run(diff.b)}"
    marked = divergence_row(diff)
    # One substitute() pass: a value put in is not read for placeholders again, so ``${x}``
    # in a run stays text; every value was escaped for where it stands as it was built.
    return template.substitute(
        policy=policy,
        title=_text(title),
        style=style,
        summary="".join(_summary(diff)),
        banner=_banner(diff, marked),
        steps="\n".join(_step_table(diff, marked, max_rows)),
        totals="\n".join(_totals(diff)),
        generator=_text(f"agenttrace {__version__}"),
    )


def divergence_row(diff: RunDiff) -> int | None:
    """The index in ``diff.steps`` of the step where the first divergence is (``None``: none,
    or a step not listed)."""
    divergence = diff.first_divergence
    if divergence is None or (divergence.label_a is None and divergence.label_b is None):
        return None
    where = (divergence.label_a, divergence.label_b)
    at = [index for index, step in enumerate(diff.steps) if (step.label_a, step.label_b) == where]
    # Of two steps with those labels (a label that is no string in a hostile file), the one
    # that diverged so.
    marked = [index for index in at if divergence.kind in diff.steps[index].differs]
    found = marked or at
    return found[0] if found else None


# --- the head ------------------------------------------------------------------------------


def _summary(diff: RunDiff) -> Iterator[str]:
    verdict = "same" if diff.same else f"differ: {diff.divergences} divergence(s)"
    for term, value in (
        ("A", ref_text(diff.a)),
        ("B", ref_text(diff.b)),
        ("verdict", verdict),
        ("only in A", f"{len(diff.only_in_a)} step(s)"),
        ("only in B", f"{len(diff.only_in_b)} step(s)"),
    ):
        yield f"<div><dt>{_text(term)}</dt><dd>{_text(value)}</dd></div>"


def _banner(diff: RunDiff, marked: int | None) -> str:
    divergence = diff.first_divergence
    if divergence is None:
        return (
            '<p id="verdict" class="banner banner-same">'
            "Same: no divergence (usage and timing may differ)</p>"
        )
    # Without a row to mark, the field diff is shown here, under the banner, as the anchor.
    detail = "" if marked is not None else _detail(divergence, "div")
    return (
        '<div id="verdict" class="banner banner-diverged" role="alert">'
        f'First divergence: <a href="#divergence">{_text(divergence_text(divergence))}</a>'
        f"{detail}</div>"
    )


# --- the steps -----------------------------------------------------------------------------


def _step_table(diff: RunDiff, marked: int | None, max_rows: int) -> Iterator[str]:
    # The columns' widths (diff.css): the step's name takes what the others leave.
    side = ["c-label", "c-step", "c-status", *(_column(name) for name in USAGE_FIELDS)]
    yield "<colgroup>"
    yield "".join(f'<col class="{column}">' for column in (*side, "c-differs", *side))
    yield "</colgroup><thead>"
    yield (
        f'<tr><th class="run-head" colspan="{SIDE_COLUMNS}">A: {_text(_run(diff.a))}</th>'
        f'<th></th><th class="run-head b-first" colspan="{SIDE_COLUMNS}">'
        f"B: {_text(_run(diff.b))}</th></tr>"
    )
    heads = ["label", "step", "status", *(HEADINGS[name] for name in USAGE_FIELDS)]
    cells = [*heads, "differs", *heads]
    yield (
        "<tr>"
        + "".join(
            f'<th class="{_head_class(index)}" scope="col">{_text(cell)}</th>'
            for index, cell in enumerate(cells)
        )
        + "</tr>"
    )
    yield "</thead><tbody>"
    shown = list(range(min(len(diff.steps), max_rows)))
    if marked is not None and marked >= max_rows:
        shown.append(marked)  # the divergence is always listed
    last = -1
    for index in shown:
        if index > last + 1:
            yield _gap(index - last - 1)
        last = index
        yield _row(diff.steps[index], index == marked)
        if index == marked and diff.first_divergence is not None:
            yield _detail(diff.first_divergence, "tr")
    if last < len(diff.steps) - 1:
        yield _gap(len(diff.steps) - 1 - last)
    yield "</tbody>"


def _column(field: str) -> str:
    return "c-cost" if field == "cost_usd" else "c-num"


def _head_class(index: int) -> str:
    if index == SIDE_COLUMNS + 1:
        return "b-first"
    return "num" if index % (SIDE_COLUMNS + 1) >= 3 and index != SIDE_COLUMNS else ""


def _gap(count: int) -> str:
    return (
        f'<tr class="gap"><td colspan="{COLUMNS}">{count} more step(s) not listed '
        "(agenttrace diff --json lists every one)</td></tr>"
    )


def _row(step: StepDiff, marked: bool) -> str:
    classes = ["step"]
    if step.label_a is None:
        classes.append("only-b")
    elif step.label_b is None:
        classes.append("only-a")
    elif step.differs:
        classes.append("changed")
    if marked:
        classes.append("divergence")
    anchor = ' id="divergence"' if marked else ""
    deltas = step.deltas()
    a, b = _side(step, "a", deltas), _side(step, "b", deltas)
    differs = f'<td class="differs">{_text(differs_text(step))}</td>'
    return f'<tr{anchor} class="{" ".join(classes)}">{a}{differs}{b}</tr>'


def _side(step: StepDiff, side: str, deltas: dict[str, dict[str, float | None]]) -> str:
    """Run ``side``'s cells of a row (``a`` or ``b``): one empty cell across where the step is
    not in that run."""
    label, name = getattr(step, f"label_{side}"), getattr(step, f"name_{side}")
    status = getattr(step, f"status_{side}")
    edge = " b-first" if side == "b" else ""
    if label is None and getattr(step, f"usage_{side}") is None:
        return f'<td class="absent{edge}" colspan="{SIDE_COLUMNS}">not in run {side.upper()}</td>'
    depth = min(step.depth, MAX_DEPTH_CLASS)
    kind = f'<span class="kind kind-{_text(_slug(step.kind))}">{_text(step.kind)}</span>'
    shown_name = _text(_cut_plain(name or "", 200))
    status_cell = (
        f'<span class="status status-{_text(_slug(status))}">{_text(status)}</span>'
        if status
        else ""
    )
    cells = [
        f'<td class="label{edge}" title="{_text(label or "")}">{_text(label or "-")}</td>',
        f'<td class="step-name depth-{depth}" title="{_text(_cut_plain(name or "", 1000))}">'
        f"{kind}{shown_name}</td>",
        f"<td>{status_cell}</td>",
    ]
    for field in USAGE_FIELDS:
        cells.append(f'<td class="num">{_usage(field, deltas[field], side)}</td>')
    return "".join(cells)


def _usage(field: str, values: dict[str, float | None], side: str) -> str:
    """A's value; B's with B minus A after it where both are known and differ."""
    text = _text(number(field, values[side]))
    delta = values["delta"]
    if side == "a" or delta is None or delta == 0:
        return text
    trend = "up" if delta > 0 else "down"  # more tokens, cost or time: the colour of a cost
    return f'{text}<span class="delta {trend}">{_text(number(field, delta, signed=True))}</span>'


# --- the divergence ------------------------------------------------------------------------


def _detail(divergence: Divergence, element: str) -> str:
    """The field-level diff of the first divergence: a row under its step (``tr``) or a block
    in the banner (``div``)."""
    parts = [f"<h3>{_text(divergence.kind)}: what differs, A against B</h3>"]
    if divergence.note:
        parts.append(f'<p class="hint note">{_text(divergence.note)}</p>')
    if divergence.diff.changes:
        parts.append('<table class="changes"><thead><tr><th scope="col">field</th>')
        parts.append('<th scope="col">A</th><th scope="col">B</th></tr></thead><tbody>')
        parts.extend(_change(change) for change in divergence.diff.changes)
        parts.append("</tbody></table>")
    if divergence.diff.more:
        parts.append(f'<p class="hint">{divergence.diff.more} more difference(s) not shown</p>')
    body = "".join(parts)
    if element == "div":
        return f'<div id="divergence" class="divergence-detail">{body}</div>'
    return f'<tr class="divergence-detail"><td colspan="{COLUMNS}">{body}</td></tr>'


def _change(change: Change) -> str:
    a = _value(change.a) if change.a_present else '<span class="empty">(absent)</span>'
    b = _value(change.b) if change.b_present else '<span class="empty">(absent)</span>'
    row = f'<tr><th scope="row"><code>{_text(change.path)}</code></th><td>{a}</td><td>{b}</td></tr>'
    if not change.text_diff:
        return row
    lines = "\n".join(
        f'<span class="{_diff_class(line)}">{_text(line)}</span>' for line in change.text_diff
    )
    return f'{row}<tr><td></td><td colspan="2"><pre class="text-diff">{lines}</pre></td></tr>'


def _diff_class(line: str) -> str:
    if line.startswith(("---", "+++", "@@")):
        return "hunk"
    return {"-": "del", "+": "add"}.get(line[:1], "same")


def _value(value: Any) -> str:
    """A value of the field diff in a ``<pre>``: a string as itself, else its JSON."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
        except (TypeError, ValueError, RecursionError):
            text = repr(value)
    note = ""
    if was_cut(value):  # cut by the diff itself, as every report shows it
        note = f'<span class="cut">cut at {MAX_VALUE_CHARS} characters</span>'
    return f"<pre>{_cut(text)}</pre>{note}"


# --- the totals ----------------------------------------------------------------------------


def _totals(diff: RunDiff) -> Iterator[str]:
    yield (
        '<thead><tr><th scope="col"></th><th class="num" scope="col">A</th>'
        '<th class="num" scope="col">B</th><th class="num" scope="col">B - A</th></tr></thead>'
    )
    yield "<tbody>"
    for name, values in diff.as_json()["totals"].items():
        cells = [number(name, values[key], signed=key == "delta") for key in ("a", "b", "delta")]
        yield (
            f'<tr><th scope="row">{_text(name)}</th>'
            + "".join(f'<td class="num">{_text(cell)}</td>' for cell in cells)
            + "</tr>"
        )
    yield "</tbody>"


# --- text ----------------------------------------------------------------------------------


def _text(value: object) -> str:
    """``value`` as HTML text (element text or a double-quoted attribute): ``<``, ``>``, ``&``
    and quotes escaped, a lone surrogate as its ``\\u`` escape so the page encodes as UTF-8."""
    return writable(html.escape(str(value), quote=True))


def _cut(text: str) -> str:
    """``text`` escaped, up to :data:`MAX_TEXT_CHARS` characters and a note on the rest."""
    if len(text) <= MAX_TEXT_CHARS:
        return _text(text)
    left = len(text) - MAX_TEXT_CHARS
    note = f"… {left} more character(s) not shown"
    return f'{_text(text[:MAX_TEXT_CHARS])}<span class="cut">{note}</span>'


def _cut_plain(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _slug(word: str) -> str:
    """A word as a class name's tail (``in doubt``: ``in-doubt``)."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in word.lower())[:40]


def _run(ref: RunRef) -> str:
    return f"{_cut_plain(ref.session, 200)} run {ref.run}"
