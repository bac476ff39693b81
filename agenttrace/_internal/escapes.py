"""Text from a session shown on a terminal: an agent's name, a tool's, a file's."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Control characters, and the separators ``str.splitlines`` (and some terminals) break at."""


def escaped(text: str) -> str:
    """``text`` with its control characters as their escapes: a file name or an agent's text
    that holds a newline or a terminal escape stays one harmless line."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
