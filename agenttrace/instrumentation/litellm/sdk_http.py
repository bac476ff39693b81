"""The HTTP responses a re-entered run's replies are read from, made here, nothing sent.

A Stainless-built SDK (OpenAI's, Anthropic's) parses a reply, or iterates a stream, from an HTTP
response of the library it speaks: ``httpx``, or ``httpx2`` from openai 3 and newer Anthropic
releases. A reply the journal answers is handed to the SDK's own parsers over a response made
of the same library, as if the client had posted to the endpoint.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["made_response"]


def made_response(package: str, client: Any, path: str, content_type: str, body: bytes) -> Any:
    """A ``200`` response with ``body`` of ``content_type``, of the HTTP library ``package``'s
    SDK (``"openai"``, ``"anthropic"``) reads, to a ``POST`` of ``client`` to ``path``."""
    namespace = vars(importlib.import_module(f"{package}._response"))
    http = namespace.get("httpx2") or namespace["httpx"]
    url = str(getattr(client, "base_url", "http://replayed/")).rstrip("/") + path
    return http.Response(
        200,
        headers={"content-type": content_type},
        content=body,
        request=http.Request("POST", url),
    )
