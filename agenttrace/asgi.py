"""The ASGI middleware that joins a request to the client's op:
``app = agenttrace.asgi.Middleware(app)`` (docs/how-to/cross-process.md, "HTTP")."""

from __future__ import annotations

from agenttrace.tracing.http_carrier import Middleware

__all__ = ["Middleware"]
