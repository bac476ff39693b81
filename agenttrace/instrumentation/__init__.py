"""Patches for LLM client libraries (litellm), applied with wrapt and undone exactly."""
