"""The effect class of a framework's tool (a smolagents ``Tool``, a Claude Agent SDK tool), which
agenttrace cannot declare with ``@agenttrace.tool(effect=...)``: what a resume may do again with
a call of it (docs/journal.md, "Effect classes").

Who says, first that answers:

1. the application: ``init(tool_effects={"web_search": "read"})`` (``AGENTTRACE_TOOL_EFFECTS``),
   by the tool's name as the framework gives it; it knows how it deploys a tool, and it is the
   only way to declare one whose code it does not own (a library's, a Hub tool, an MCP tool);
2. the tool itself: an ``agenttrace_effect`` attribute on its class or instance (a smolagents
   ``Tool`` subclass), written where the tool is;
3. an MCP server's tool annotations, only for a server the application trusts
   (``init(trusted_mcp_servers=[...])``): ``readOnlyHint`` is ``read``, ``idempotentHint`` (not
   read-only) is ``idempotent``. The MCP specification calls them hints that a client must not
   rely on from a server it does not trust: a server could call a payment tool read-only;
4. else ``effect``: nothing is known, and a resume never runs the call again unasked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenttrace._internal.config import EFFECT_CLASSES
from agenttrace._internal.runtime import runtime

EFFECT_ATTRIBUTE = "agenttrace_effect"
"""The attribute a framework's tool declares its effect class with (namespaced: a framework
owns the rest of its tool's names)."""


def framework_effect(
    name: str,
    tool: Any = None,
    *,
    server: str | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> str:
    """The effect class of a call of the framework tool ``name`` (the object ``tool``, of the
    MCP server ``server`` with ``annotations``), by the rules of this module."""
    settings = runtime.settings
    effect = settings.tool_effects.get(name)
    if effect is not None:
        return effect
    declared = getattr(tool, EFFECT_ATTRIBUTE, None) if tool is not None else None
    if isinstance(declared, str) and declared in EFFECT_CLASSES:
        return declared
    if server is not None and annotations and server in settings.trusted_mcp_servers:
        return annotated_effect(annotations)
    return "effect"


def annotated_effect(annotations: Mapping[str, Any]) -> str:
    """What MCP tool annotations say, as an effect class: read-only is ``read``; else
    idempotent is ``idempotent``; else ``effect`` (``destructiveHint`` false still changes the
    world: it only adds)."""
    if annotations.get("readOnlyHint") is True:
        return "read"
    if annotations.get("idempotentHint") is True:
        return "idempotent"
    return "effect"
