"""Masking (``mask_sensitive``): IP addresses and provider request ids taken out of text.

They are no credentials (:mod:`agenttrace._internal.redact` replaces those whatever is set),
but they say who called from where (an IP in a user's message, a tool's argument, an error),
and a provider's id of a response (``chatcmpl-...``, ``msg_01...``, ``req_...``) lets anyone
who holds it ask the provider about the call. With ``mask_sensitive`` on, the redaction
policy also replaces:

- every IPv4 address, ``203.0.113.7`` -> ``[IP]``, and every IPv6 address,
  ``2001:db8::7`` -> ``[IP]``, except loopback and unspecified ones (``127.0.0.1``, ``::1``,
  ``0.0.0.0``): they name no host. The whole address goes, not its last part: a /24 still
  narrows a caller down to a company or a home line, and a hash of an IPv4 address is undone
  by trying all 2**32 of them;
- provider ids by their shape, prefix kept: ``chatcmpl-AbC...`` -> ``chatcmpl-[ID]``, and
  ``resp_``, ``msg_``, ``req_``, ``msgbatch_``, ``cmpl-`` and OpenRouter's ``gen-`` ids
  (long enough that agenttrace's own ``msg_001`` never matches);
- the whole value under a key that names a request id, whatever its shape
  (``x-request-id``, ``request-id``, ``anthropic-request-id``, ``request_id``,
  ``x-amzn-requestid``, ``gen_ai.response.id``): see :data:`ID_KEYS`.

Limits: a dotted quad after ``v`` or ``version`` (``v1.2.3.4``, ``version 1.2.3.4``, ``==``)
is taken for a version and kept; one elsewhere is taken for an address. A provider whose ids
have no known prefix has them masked only under a request-id key.
"""

from __future__ import annotations

import functools
import ipaddress
import re

from agenttrace._internal.runtime import runtime

IP_MARK = "[IP]"
ID_MARK = "[ID]"

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
# A dotted quad not inside a longer dotted or word token (v1.2.3.4, 1.2.3.4.5: versions).
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\.?\d)(?!\w)")
# Hex and colons with two colons at least; ipaddress decides whether it is an address.
_IPV6 = re.compile(r"(?<![\w:.])(?=[0-9A-Fa-f]*:[0-9A-Fa-f]*:)[0-9A-Fa-f:]{6,39}(?![\w:])")
_VERSION_BEFORE = re.compile(r"(?:version|ver|release)\s*[:=]?\s*$|[=~<>!]=\s*$", re.IGNORECASE)
"""What, just before a dotted quad, says it is a version (``version 1.2.3.4``, ``==1.2.3.4``)."""

_PROVIDER_ID = re.compile(
    r"(?<![\w-])(chatcmpl-|cmpl-|resp_|msg_|req_|msgbatch_|gen-\d{10}-)"
    r"(?:(?<=chatcmpl-)[A-Za-z0-9-]{8,}|[A-Za-z0-9]{16,})(?![\w-])"
)
"""A provider's response or request id: OpenAI's ``chatcmpl-`` (litellm's ``chatcmpl-<uuid>``
too), ``cmpl-``, ``resp_``, ``req_``; Anthropic's ``msg_01...``, ``req_01...``,
``msgbatch_...``; OpenRouter's ``gen-<time>-...``. 16 characters at least after the prefix
(8 for ``chatcmpl-``, whose ids are long anyway), letters and digits: agenttrace's own
``msg_001`` and ``msg_<writer>_001`` are never one."""

ID_KEYS = re.compile(
    r"(?:x-)?(?:[a-z]+-)?request[-_]?id|requestid|x-amzn-requestid|gen_ai\.response\.id",
    re.IGNORECASE,
)
"""Keys (headers, fields, attributes) whose whole value is a request or response id."""


def masking() -> bool:
    """Whether ``mask_sensitive`` is on in this process (``init``, else the variable)."""
    return runtime.settings.mask_sensitive


@functools.lru_cache(maxsize=1024)
def is_id_key(key: str) -> bool:
    """True if a key names a request or response id (``x-request-id``, ``gen_ai.response.id``)."""
    return ID_KEYS.fullmatch(key) is not None


def mask_text(text: str) -> str:
    """``text`` with its IP addresses and provider ids masked (whatever the setting says)."""
    if "." in text:
        text = _IPV4.sub(_ipv4, text)
    if "::" in text or text.count(":") >= 2:
        text = _IPV6.sub(_ipv6, text)
    if "_" in text or "-" in text:
        text = _PROVIDER_ID.sub(lambda m: m.group(1) + ID_MARK, text)
    return text


def _ipv4(match: re.Match[str]) -> str:
    found = match.group(0)
    if found.startswith("127.") or found == "0.0.0.0":
        return found  # names no host
    if _VERSION_BEFORE.search(match.string, max(0, match.start() - 12), match.start()):
        return found
    return IP_MARK


def _ipv6(match: re.Match[str]) -> str:
    found = match.group(0)
    try:
        address = ipaddress.IPv6Address(found)
    except ValueError:  # a time, a MAC address, hex that is no address
        return found
    if address.is_loopback or address.is_unspecified:
        return found
    return IP_MARK
