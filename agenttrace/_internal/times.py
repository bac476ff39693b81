"""Times, as every format agenttrace reads and writes spells them: one module, one contract each.

- An event's ``ts`` (``2026-11-23T00:32:34.350Z``): :func:`event_ts` writes it,
  :func:`ts_nanoseconds` reads exactly that form back (a canonical event's span event carries
  this time, so it can be rebuilt from the event).
- Any ISO 8601 time another tool wrote (any fraction, any offset; none is UTC):
  :func:`iso_nanoseconds` and :func:`iso_ms`, exact (integer arithmetic, no float rounding)
  and clamped to the range OTLP carries.
- Milliseconds since the epoch (the opTree's unit) back to text: :func:`ms_iso` (an event's
  ``ts`` form) and :func:`iso_seconds` (to the second, for listings).
"""

from __future__ import annotations

import calendar
import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any

MAX_EPOCH_NS = 2**63 - 1
"""The last time OTLP's unsigned 64-bit nanoseconds (and a signed reader) can carry."""
MAX_MS = MAX_EPOCH_NS // 1_000_000
"""The same in milliseconds: the opTree's last time."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(Z|z|[+-]\d{2}:?\d{2})?$"
)

# Each cache is one immutable pair, read once and replaced whole (one store of a global, atomic
# under the GIL): a thread in another second can replace it between two calls, never pair one
# second with the other's text. No lock on a path every event takes.
_second: tuple[int | None, str] = (None, "")  # the last whole second formatted, and its text
_parsed: tuple[str, int] = ("", 0)  # the last whole second parsed, and its seconds since the epoch


def event_ts(time_ns: int) -> str:
    """``time_ns`` (ns since the epoch) as an event's ``ts``: ISO-8601 UTC with milliseconds.
    The date and time part is formatted once a second: an event per call made datetime's
    formatting a noticeable share of logging one."""
    global _second
    seconds, rest = divmod(time_ns, 1_000_000_000)
    cached = _second
    if cached[0] != seconds:
        cached = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
        _second = cached
    return f"{cached[1]}.{rest // 1_000_000:03d}Z"


def ts_nanoseconds(ts: str) -> int | None:
    """The time an event's ``ts`` names, in ns since the epoch (``None`` if it is not one of
    agenttrace's ``YYYY-MM-DDTHH:MM:SS.mmmZ``)."""
    global _parsed
    if len(ts) != 24 or ts[-1] != "Z" or ts[19] != ".":
        return None
    whole, millis = ts[:19], ts[20:23]
    cached = _parsed
    try:
        if cached[0] != whole:  # parsed once a second: strptime costs more than the event
            cached = (whole, calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")))
            _parsed = cached
        return (cached[1] * 1000 + int(millis)) * 1_000_000
    except ValueError:
        return None


def ts_ms(ts: Any) -> int | None:
    """An event's ``ts`` in ms since the epoch (``None`` for anything else)."""
    nanoseconds = ts_nanoseconds(ts) if isinstance(ts, str) else None
    return None if nanoseconds is None else nanoseconds // 1_000_000


def iso_nanoseconds(value: Any) -> int | None:
    """An ISO 8601 time (``2026-01-26T10:00:05Z``, any fraction to the nanosecond, any offset;
    no offset is UTC) in nanoseconds since the epoch, or ``None`` if it is not one. Times
    before the epoch are 0, times past what OTLP carries its last."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    match = _ISO.match(value.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second),
            tzinfo=timezone.utc,
        )  # fmt: skip
        if zone and zone not in ("Z", "z"):
            sign = 1 if zone[0] == "+" else -1
            digits = zone[1:].replace(":", "")
            moment -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    except (ValueError, OverflowError):  # no such day; an offset past the calendar's ends
        return None
    delta = moment - _EPOCH
    whole = (delta.days * 86_400 + delta.seconds) * 1_000_000_000
    nanoseconds = whole + int((fraction or "0").ljust(9, "0"))
    return min(max(nanoseconds, 0), MAX_EPOCH_NS)


def iso_ms(value: Any) -> int | None:
    """:func:`iso_nanoseconds` in milliseconds (the opTree's unit)."""
    nanoseconds = iso_nanoseconds(value)
    return None if nanoseconds is None else min(nanoseconds // 1_000_000, MAX_MS)


def clamp_ms(ms: float) -> int:
    """A time or duration in ms within the opTree's range (0 to OTLP's last time)."""
    return int(min(max(ms, 0), MAX_MS))


def ms_iso(ms: int) -> str:
    """``ms`` since the epoch as an event's ``ts``: ISO 8601 UTC with milliseconds (times past
    the calendar's end are its last)."""
    ms = clamp_ms(ms)
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return datetime.max.strftime("%Y-%m-%dT%H:%M:%S.999Z")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def iso_seconds(ms: int | None) -> str | None:
    """``ms`` since the epoch as ISO 8601 UTC to the second (``2026-11-27T10:26:37Z``)."""
    if ms is None:
        return None
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))
    except (OverflowError, OSError, ValueError):
        return None
