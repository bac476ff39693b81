"""The server side of tests/test_mcp_travel.py: a real MCP server (the ``mcp`` SDK's
``MCPServer``) in a process of its own, with agenttrace and a tracer provider of its own
exporting every span to the file the test reads (``tests/travel_child.py``).

``python tests/mcp_tool_server.py SPANS SESSIONS stdio`` serves over stdin/stdout;
``... http PORT`` serves streamable HTTP on 127.0.0.1:PORT (path ``/mcp``). Its one tool,
``research``, runs the ``helper`` agent, whose root run joins the client's tool call.
"""

from __future__ import annotations

import os
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import agenttrace
from tests import travel_child


def main() -> None:
    spans, sessions, transport = sys.argv[1:4]
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(travel_child.FileSpanExporter(spans)))
    # The SDK's own spans (its tools/call server span) go to the global provider, as they do
    # under opentelemetry-instrument: the same one agenttrace records on.
    trace.set_tracer_provider(provider)
    agenttrace.init(
        tracer_provider=provider,
        console="quiet",
        sessions_dir=sessions,
        billing_file=os.path.join(sessions, "accounting.jsonl"),
    )

    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("research-server")

    # Read-only, as the server says: a client that trusts it journals the call as ``read``.
    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def research(x: int) -> int:
        """Run the helper agent on ``x``."""
        return travel_child.helper(x)

    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[4]))


if __name__ == "__main__":
    main()
