"""Identifiers that are not counters: transaction ids (and a fresh session's id)."""

from __future__ import annotations

import os


def new_txn_id() -> str:
    """A fresh transaction id: 16 hex digits, short enough for console lines, unique enough."""
    return os.urandom(8).hex()
