"""The version of agenttrace, in one place."""

__version__ = "0.1.0"
"""This release's version; the package's metadata takes it from here (pyproject.toml)."""
