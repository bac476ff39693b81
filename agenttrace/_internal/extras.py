"""The optional extras a message can ask for, and the one line that says how to add one.

agenttrace is installed from a checkout or a wheel built from it (README, "Install"): its
distribution, ``agenttrace-otel``, is not on the package index yet, so a hint naming it with an
extra would fail. An extra added to an install is its own packages, which works however
agenttrace was installed: the hints name those (tests check them against pyproject.toml and the
README).
"""

from __future__ import annotations

__all__ = ["EXTRA_PACKAGES", "EXTRA_PACKAGE_SETS", "install_hint"]

EXTRA_PACKAGES = {
    "cli": "rich>=13,<16",
    "grpc": "opentelemetry-exporter-otlp-proto-grpc>=1.30,<2",
    "smolagents": "smolagents>=1.25,<2",
    "atif": "atif>=1.7,<2",
    "postgres": "psycopg[binary]>=3.2,<4",
}
"""Each extra a message points to, as the requirement pyproject.toml declares for it."""

EXTRA_PACKAGE_SETS = {
    "serve": ("starlette>=0.41,<2", "uvicorn>=0.30,<1", "sse-starlette>=2.1,<4"),
}
"""The extras of several packages, as pyproject.toml declares them, in its order."""


def install_hint(extra: str) -> str:
    """``pip install '<requirement>' (the [extra] extra)``: how to add ``extra``'s packages."""
    packages = EXTRA_PACKAGE_SETS.get(extra) or (EXTRA_PACKAGES[extra],)
    quoted = " ".join(f"'{package}'" for package in packages)
    return f"pip install {quoted} (the [{extra}] extra)"
