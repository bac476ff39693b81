"""A step-journal line as the event stream writes its lines (docs/journal.md)."""

from __future__ import annotations

import json
import time
from typing import Any

from agenttrace._internal.times import event_ts


def journal_bytes(line: dict[str, Any]) -> bytes:
    """``line`` stamped with the time and encoded as the stream's lines are (the same
    encoder's spacing), with its newline."""
    line["ts"] = event_ts(time.time_ns())
    return (_LINE.encode(line) + "\n").encode("utf-8", "backslashreplace")


_LINE = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))
