"""The version of agenttrace, in one place."""

__version__ = "0.1.0"
