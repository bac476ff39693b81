"""A session file as one self-contained HTML page: the opTree, the dialog and each agent's view.

The page loads nothing: its CSS and JavaScript are inline, and a Content-Security-Policy allows
only those two (by hash) and no network at all, so it can be mailed, attached to a bug or opened
from a disk with nothing to fetch. The session is embedded as JSON in a
``<script type="application/json">`` element, with ``<``, ``>`` and ``&`` written as JSON
escapes so that no text in the session (``</script>``, ``<!--``) can end that element early;
the script builds the page from it with ``textContent`` only, so no text is read as markup.

The markup, CSS and script are package data next to this module, in ``page/``: ``page.html`` is
a :class:`string.Template` whose ``${name}`` placeholders are filled in one pass, each with a
value escaped for where it stands (see :func:`to_html`); ``page.css`` and ``page.js`` are
inlined as they are, and the policy's hashes are computed from them when they are read, so an
edit to either file needs nothing else changed.

The URL fragment steers the page, e.g. for a headless browser: ``#expand=all`` opens every
node of the tree, ``#collapse=all`` closes them, ``#agent=Jill`` picks the perspective shown
(parts join with ``&``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import math
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

from agenttrace._version import __version__
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.optree import agent_names
from agenttrace.views.exports._spans import Source, load, nesting_checked
from agenttrace.views.viewer import SessionViewer

DATA_ELEMENT_ID = "agenttrace-data"
# The page's files: package data of this module's package (pyproject.toml's package-data).
PAGE_DIRECTORY = "page"
TEMPLATE_FILE = "page.html"
STYLE_FILE = "page.css"
SCRIPT_FILE = "page.js"


@dataclass(frozen=True)
class _Page:
    """The page's files as read once, with what follows from them alone."""

    template: Template
    style: str  # the text of the <style> element, exactly as written into every page
    script: str  # the text of the code's <script> element, likewise
    policy: str  # the Content-Security-Policy, escaped for the template's content="..."


def page_file(name: str) -> str:
    """The text of one of the page's files (``page.html``, ``page.css``, ``page.js``).

    Read with :mod:`importlib.resources`, so it is found in a source tree, an installed wheel
    and a zip alike.
    """
    package = resources.files(__name__.rpartition(".")[0])
    return (package / PAGE_DIRECTORY / name).read_text(encoding="utf-8")


@functools.cache
def _page() -> _Page:
    # Each of the two opens on a line of its own after its tag. The policy hashes exactly the
    # text that is inlined (the same strings below), so the browser runs that and nothing else.
    style = "\n" + page_file(STYLE_FILE)
    script = "\n" + page_file(SCRIPT_FILE)
    policy = "; ".join(
        (
            "default-src 'none'",
            f"script-src '{csp_hash(script)}'",
            f"style-src '{csp_hash(style)}'",
            "img-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        )
    )
    return _Page(
        template=Template(page_file(TEMPLATE_FILE)),
        style=style,
        script=script,
        # Readable quotes in the policy: only ``"`` would end the attribute.
        policy=html.escape(policy, quote=False).replace('"', "&quot;"),
    )


def to_html(source: Source) -> str:
    """The session as one HTML page that needs no network.

    ``source``: a :class:`~agenttrace.formats.session.files.LoadedFile` or a session file path (read
    with :func:`~agenttrace.formats.session.files.read_session_file`, which raises
    :class:`~agenttrace.formats.session.files.SessionFileError`). An event stream has no opTree: its
    page shows the dialog and the perspectives only.
    """
    loaded = load(source)
    with nesting_checked(loaded):
        return _page_of(loaded)


def page_data(loaded: LoadedFile) -> dict[str, Any]:
    """What the page's script renders: the runs' opTrees, the dialog, each agent with its
    perspective, the file's ``meta``. The HTML export embeds it; ``agenttrace serve`` sends the
    same object (with its live fields) to the same script, so both pages are one renderer."""
    viewer = SessionViewer(loaded.events, agent_names(loaded.runs))  # the tree's names
    agents = viewer.list_agents()
    # The dialog is the conversation between the named agents (the sub-agents a run created);
    # with none named, it is everything every agent exchanged.
    named = [
        event["agent_id"]
        for event in viewer.events
        if event.get("event_type") == "agent_created" and event.get("name")
    ]
    dialog = viewer.extract_dialog(named or list(agents))
    named_set = set(named)
    return {
        "sessionId": loaded.session_id,
        "file": loaded.path.name,
        "fileKind": loaded.kind,
        "meta": loaded.meta,
        "runs": loaded.runs,
        "agents": [
            {
                "id": agent_id,
                "name": name,
                "named": agent_id in named_set,
                "perspective": viewer.extract_agent_perspective(agent_id),
            }
            for agent_id, name in agents.items()
        ],
        "dialog": [
            {key: message.get(key) for key in ("speaker", "agent_id", "role", "content")}
            for message in dialog
        ],
        "generator": f"agenttrace {__version__}",
    }


def _page_of(loaded: LoadedFile) -> str:
    data = page_data(loaded)
    title = f"agenttrace session {loaded.session_id or loaded.path.name}"
    page = _page()
    # One pass of string.Template over page.html: a value put in is never read for placeholders
    # again, so ``${title}`` in a session stays text. Each value is escaped for its place, as
    # the page always did: the title for element text, the session as script_json, the policy
    # for a double-quoted attribute; the CSS and script are the package's own files. Jinja2's
    # autoescape would not do better here (it knows no <script> JSON or attribute-only quoting)
    # and would be one more dependency; substitute() refuses a placeholder it has no value for.
    return page.template.substitute(
        policy=page.policy,
        title=writable(html.escape(title)),
        style=page.style,
        data_id=DATA_ELEMENT_ID,
        data=script_json(data),
        script=page.script,
    )


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe as the text of a ``<script>`` element.

    ``<``, ``>`` and ``&`` only occur inside JSON strings, where their ``\\u`` escapes mean the
    same, so ``</script>`` and ``<!--`` cannot appear; U+2028/2029 are escaped for old parsers.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # NaN or infinity somewhere: JSON.parse would refuse them
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"))
    # A lone surrogate (``"\\ud800"`` in a file is valid JSON) cannot be written as UTF-8: it
    # becomes its ``\\u`` escape again, which is what it was in the file (it is in a string).
    return (
        writable(text)
        .replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def writable(text: str) -> str:
    """``text`` with each lone surrogate as its ``\\u`` escape, so the page encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def csp_hash(text: str) -> str:
    """A Content-Security-Policy source (``'sha256-...'`` without its quotes) allowing the
    inline element whose text is exactly ``text``."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")
