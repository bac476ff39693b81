"""``myproject``'s agent class: the cafe demo's, which is an ``@agenttrace.agent_class``."""

from examples.cafe import Agent

__all__ = ["Agent"]
