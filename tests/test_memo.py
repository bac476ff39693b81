"""The bounded memo the per-name caches use (agenttrace/_internal/memo.py)."""

from __future__ import annotations

from agenttrace._internal.memo import LIMIT, BoundedMemo


def test_a_memo_keeps_what_it_was_given_until_it_is_full_then_starts_over() -> None:
    memo: BoundedMemo[str, int] = BoundedMemo()
    for index in range(LIMIT):
        assert memo.keep(f"name-{index}", index) == index
    assert len(memo) == LIMIT
    assert memo.get("name-7") == 7
    assert memo.keep("one more", -1) == -1
    assert dict(memo) == {"one more": -1}
