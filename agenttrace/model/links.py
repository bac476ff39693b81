"""Which reply a text another agent hears stands for: the ``substance`` rule (docs/events.md,
"Which reply heard text stands for").

A link is a claim every view presents as fact (the dialog shows the text once, with who said it;
the causality views follow it), so a wrong link is worse than none. A heard text links to a
recent assistant reply when

1. **identity is known**: the text is a ``LoggedString`` carrying the id (decided by the caller,
   :func:`~agenttrace.model.events.substance_of`), or it *is* the reply's own ``str`` object,
   passed along unchanged (any length but one character: CPython shares those);
2. or **its content says so, beyond doubt**: the text equals the reply, or is the reply with a
   tag around it (``"[Jack]: " + reply``: the reply is at least :data:`QUOTED_REPLY_MIN`
   characters and half the text), or is the reply with parts replaced by a redaction marker
   (``"password: [REDACTED]"`` for ``"password: 1234"``: a hook or a redaction edited what it
   relayed), with or without a leading ``[Name]:`` tag; and

   - the reply has at least :data:`LINK_MIN_CHARS` characters (``"Yes."`` typed by a user is
     not the ``"Yes."`` another agent said),
   - exactly one remembered reply fits (a text two replies said, or two replies could have
     become, links to neither),
   - and the hearer could have heard the speaker: they are in one agent tree, or both are
     top-level agents (the caller says: ``reachable``).

Lookups cost a few dictionary probes (replies are indexed by their text, their first and their
last characters); only a text holding a redaction marker is matched against every remembered
reply.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

REPLIES_REMEMBERED = 1024
"""How many recent assistant replies a session remembers by their text. The strings are the
transcript's own; only the index is extra."""

QUOTED_REPLY_MIN = 16
"""A reply shorter than this links only to text equal to it, never to text that merely starts
or ends with it (``"ok"`` would match half of everything)."""

LINK_MIN_CHARS = 12
"""A reply shorter than this links by identity only, never by content: short texts
(``"Yes."``, ``"Done"``) are said independently all the time."""

REDACTED_MIN_LITERAL = 8
"""A redacted text must keep this many characters of its own besides its markers and tag to
link (``"[REDACTED]"`` alone fits any reply)."""

REDACTION_MARKERS = ("[REDACTED]", "[redacted]", "<redacted>", "***")
"""What a hook or a redaction puts in place of what it removed (agenttrace's own first)."""

_TAG = re.compile(r"\[[^\]\n]{1,100}\]:? ?")
"""A leading ``[Jack]: `` tag, as relays put before what an agent said."""

_KEY = QUOTED_REPLY_MIN
"""How many leading (trailing) characters index a reply for the quoted rule."""


@dataclass(slots=True)
class _Said:
    message_id: str
    agent: str | None
    ambiguous: bool = False
    """Two different replies said this text: it links to neither."""


Reachable = Callable[[str | None], bool]
"""Whether a reply's speaker (an agent id) is one the hearer could have heard."""


class Replies:
    """A session's memory of its recent assistant replies, and the rule above."""

    def __init__(self, limit: int = REPLIES_REMEMBERED) -> None:
        self._limit = limit
        self._by_text: dict[str, _Said] = {}  # insertion order is age
        self._objects: dict[int, tuple[str, str]] = {}  # id(str) -> (the str, message id)
        self._heads: dict[str, set[str]] = {}
        self._tails: dict[str, set[str]] = {}

    def remember(self, content: str, message_id: str, agent: str | None) -> None:
        """An assistant entry said ``content`` (``message_id``: the reply it stands for)."""
        said = self._by_text.pop(content, None)
        if said is None:
            said = _Said(message_id, agent)
            if len(content) >= QUOTED_REPLY_MIN:
                self._heads.setdefault(content[:_KEY], set()).add(content)
                self._tails.setdefault(content[-_KEY:], set()).add(content)
        elif said.message_id != message_id:
            said.ambiguous = True
        self._by_text[content] = said  # the newest at the end
        if len(content) > 1:
            known = self._objects.pop(id(content), None)
            if known is not None and known[0] is content and known[1] != message_id:
                message_id = ""  # one object two replies said: it links by content, or not
            self._objects[id(content)] = (content, message_id)
        if len(self._objects) > self._limit:
            del self._objects[next(iter(self._objects))]
        if len(self._by_text) > self._limit:
            self._forget(next(iter(self._by_text)))

    def find(self, text: str, reachable: Reachable | None = None) -> str | None:
        """The message id of the reply ``text`` stands for, by the rule above; ``None`` if none
        does beyond doubt. ``reachable`` (default: any speaker) limits the speakers."""
        if not text:
            return None
        same = self._objects.get(id(text))
        if same is not None and same[0] is text and same[1]:
            return same[1]
        found: set[str] = set()
        said = self._by_text.get(text)
        if said is not None and len(text) >= LINK_MIN_CHARS:
            found.add(text)
        if not found and len(text) > QUOTED_REPLY_MIN:  # the text itself said it: that reply
            for reply in (*self._tails.get(text[-_KEY:], ()), *self._heads.get(text[:_KEY], ())):
                if len(reply) < len(text) <= 2 * len(reply) and (
                    text.endswith(reply) or text.startswith(reply)
                ):
                    found.add(reply)
        if (
            not found
            and any(marker in text for marker in REDACTION_MARKERS)
            and len(_MARKERS.sub("", _TAG.sub("", text, count=1))) >= REDACTED_MIN_LITERAL
        ):
            found.update(self._redacted(text))
        return self._unique(found, reachable)

    def _unique(self, replies: set[str], reachable: Reachable | None) -> str | None:
        candidates = [self._by_text[reply] for reply in replies]
        if reachable is not None:
            candidates = [said for said in candidates if reachable(said.agent)]
        if len(candidates) != 1 or candidates[0].ambiguous:
            return None
        return candidates[0].message_id

    def _redacted(self, text: str) -> list[str]:
        """The replies ``text`` is, parts of them replaced by a redaction marker (and perhaps a
        leading tag added): each reply of at least :data:`LINK_MIN_CHARS` characters is
        matched against the text's pattern (only texts holding a marker get here)."""
        patterns = [_pattern(text)]
        tag = _TAG.match(text)
        if tag is not None and tag.end() < len(text):
            patterns.append(_pattern(text[tag.end() :]))
        return [
            reply
            for reply in self._by_text
            if len(reply) >= LINK_MIN_CHARS and any(p.fullmatch(reply) for p in patterns)
        ]

    def _forget(self, content: str) -> None:
        del self._by_text[content]
        for index, key in ((self._heads, content[:_KEY]), (self._tails, content[-_KEY:])):
            bucket = index.get(key)
            if bucket is not None:
                bucket.discard(content)
                if not bucket:
                    del index[key]


_MARKERS = re.compile("|".join(re.escape(marker) for marker in REDACTION_MARKERS))


def _pattern(text: str) -> re.Pattern[str]:
    """``text`` as a pattern in which each redaction marker stands for some characters."""
    parts = _MARKERS.split(text)
    return re.compile("(?s:.+?)".join(re.escape(part) for part in parts))
