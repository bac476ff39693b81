"""Exports of a session file to other tools' formats.

- :func:`to_jaeger`: Jaeger's JSON, the document Jaeger UI's "Upload JSON" opens;
- :func:`to_otlp_json`: OTLP/JSON, for any OpenTelemetry collector or backend;
- :func:`to_html`: one self-contained HTML page (opTree, dialog, each agent's perspective);
- :func:`to_exchanges`: the exchange log (docs/how-to/exports.md, "The exchange log"), an
``exchange`` line per
  root run (:func:`exchanges_jsonl` as JSON Lines);
- :func:`to_std008`: a STD-008 multi-agent session document (docs/std008.schema.json), and
  :func:`write_std008` to write one under the name its section 2.1 gives;
- :func:`agenttrace.views.exports.atif.to_atif`: an ATIF trajectory (needs the ``[atif]``
  extra, so it is imported from its module, not from here).

Each takes a :class:`~agenttrace.formats.session.files.LoadedFile` (from
:func:`~agenttrace.formats.session.files.read_session_file`) or a session file's path. An export
leaves the process: what it writes is redacted and capped like the spans
(:func:`agenttrace.views.public.public_view`), though the session file keeps content verbatim.
"""

from __future__ import annotations

from agenttrace.views.exports.exchanges import exchanges_jsonl, to_exchanges
from agenttrace.views.exports.html import to_html
from agenttrace.views.exports.jaeger import to_jaeger
from agenttrace.views.exports.otlp_json import to_otlp_json
from agenttrace.views.exports.std008 import to_std008, write_std008

__all__ = [
    "exchanges_jsonl",
    "to_exchanges",
    "to_html",
    "to_jaeger",
    "to_otlp_json",
    "to_std008",
    "write_std008",
]
