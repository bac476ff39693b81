"""The model the tests' agents call: agenttrace's scripted model on 127.0.0.1 while a cassette
records, and a port where nothing listens once the cassettes exist (a replay calls nothing)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import trip

from agenttrace.testing import ScriptedModel

MODEL = "anthropic/claude-sonnet-4-5"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's own prices, offline


@pytest.fixture(autouse=True)
def model() -> Iterator[None]:
    """The scripted model, started only when a test may record (``--agent-cassette-mode`` other
    than ``none``); otherwise the agents point at a closed port, and any live call fails."""
    if os.environ.get("TRIP_RECORD") != "1":
        trip.configure(model=MODEL, api_base="http://127.0.0.1:9", api_key="offline")
        yield
        return
    with ScriptedModel(trip.SCRIPTS) as scripted:
        trip.configure(model=MODEL, api_base=scripted.api_base, api_key="offline")
        yield
