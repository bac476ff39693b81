"""The effect class of a Claude Agent SDK tool call (docs/journal.md, "Effect classes"), by
``agenttrace.tracing.journal.effects``' rules: the application's ``init(tool_effects=...)`` by the
name the CLI gives the tool (``Bash``, ``mcp__calculator__add``), else a trusted MCP server's tool
annotations, else ``effect``.

The annotations are those of the program's own in-process MCP servers
(``create_sdk_mcp_server``, whose tools declare them with ``@tool(..., annotations=...)``): the
CLI lists each server's tools through the SDK before the model can call one, and this module
keeps what the answer says (:func:`listed`). The tools of the MCP servers the CLI runs itself,
and its own tools, declare nothing the program sees: name them in ``tool_effects``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from agenttrace.tracing.journal.effects import framework_effect

from .utils import MCP_PREFIX, mcp_server_of

MAX_TOOLS = 10_000
"""Annotated tools kept (a program that builds servers without end keeps its newest)."""

_lock = threading.Lock()
_annotations: dict[tuple[str, str], Mapping[str, Any]] = {}
"""(server, tool) -> the tool's annotations, as its server last listed them."""


def tool_effect(name: str) -> str:
    """The effect class of a call of the tool the CLI names ``name``."""
    server = mcp_server_of(name)
    annotations = None
    if server is not None:
        tool = name[len(MCP_PREFIX) + len(server) + 2 :]
        with _lock:
            annotations = _annotations.get((server, tool))
    return framework_effect(name, server=server, annotations=annotations)


def listed(server: Any, message: Any, response: Any) -> None:
    """Keep the annotations of the tools an in-process MCP server listed (``tools/list``)."""
    if not isinstance(server, str) or not isinstance(message, Mapping):
        return
    if message.get("method") != "tools/list" or not isinstance(response, Mapping):
        return
    result = response.get("result")
    tools = result.get("tools") if isinstance(result, Mapping) else None
    if not isinstance(tools, list):
        return
    with _lock:
        for tool in tools:
            name = tool.get("name") if isinstance(tool, Mapping) else None
            annotations = tool.get("annotations") if isinstance(tool, Mapping) else None
            if not isinstance(name, str):
                continue
            if isinstance(annotations, Mapping):
                if len(_annotations) >= MAX_TOOLS:
                    del _annotations[next(iter(_annotations))]
                _annotations[(server, name)] = dict(annotations)
            else:
                _annotations.pop((server, name), None)
