"""AWS event-stream frames (``application/vnd.amazon.eventstream``), as Bedrock's
``invoke-with-response-stream`` sends a streamed reply: one frame per Anthropic stream event,
whose payload is ``{"bytes": base64(event JSON)}``.

A frame is a prelude (total length, headers length, the prelude's CRC32, each a big-endian
``uint32``), the headers (name length ``uint8``, name, value type ``7`` for a string, value
length ``uint16``, value), the payload, and the CRC32 of all that came before. Built here from
the format, not with botocore, so botocore's decoder (which the SDK reads the stream with)
checks frames it did not write.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"

_STRING = 7
"""The header value type of a UTF-8 string."""


def _header(name: str, value: str) -> bytes:
    name_bytes, value_bytes = name.encode(), value.encode()
    return (
        struct.pack(">B", len(name_bytes))
        + name_bytes
        + struct.pack(">BH", _STRING, len(value_bytes))
        + value_bytes
    )


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message."""
    packed = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(packed) + len(payload) + 4
    prelude = struct.pack(">II", total, len(packed))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + packed + payload
    return message + struct.pack(">I", binascii.crc32(message))


def chunk(event: dict[str, Any]) -> bytes:
    """The frame of one Anthropic stream event, as Bedrock sends it (a ``chunk`` event)."""
    data = base64.b64encode(json.dumps(event).encode()).decode()
    payload = json.dumps({"bytes": data}).encode()
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return frame(headers, payload)


def exception(kind: str, message: str) -> bytes:
    """The frame of an error Bedrock reports in the middle of a stream (``throttlingException``,
    ``modelStreamErrorException``, ...)."""
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message}).encode())
