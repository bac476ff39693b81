"""Path labels: every address has one label, every label one address."""

from __future__ import annotations

import itertools

import pytest

from agenttrace.model.paths import format_label, kind_of, parse_label


def addresses(max_depth: int, width: int) -> list[tuple[int, ...]]:
    result: list[tuple[int, ...]] = [()]
    for length in range(1, max_depth + 1):
        result += list(itertools.product(range(1, width + 1), repeat=length))
    return result


def test_labels_are_bijective_on_every_small_address() -> None:
    all_addresses = addresses(7, 3)
    labels = [format_label(a) for a in all_addresses]
    assert len(set(labels)) == len(all_addresses)
    for address, label in zip(all_addresses, labels, strict=True):
        assert parse_label(label) == address


@pytest.mark.parametrize(
    ("address", "label", "kind"),
    [
        ((), "0", "session"),
        ((2,), "2", "turn"),
        ((2, 3), "2.3", "op"),
        ((2, 3, 1), "2.3:1", "session"),
        ((2, 3, 1, 1), "2.3.1", "turn"),
        ((2, 3, 1, 1, 4), "2.3.1.4", "op"),
        ((2, 3, 2), "2.3:2", "session"),
        ((2, 3, 2, 1, 4), "2.3:2.1.4", "op"),
        ((1, 1, 2, 1, 1, 1, 1), "1.1:2.1.1.1", "turn"),
    ],
)
def test_examples(address: tuple[int, ...], label: str, kind: str) -> None:
    assert format_label(address) == label
    assert parse_label(label) == address
    assert kind_of(address) == kind


@pytest.mark.parametrize("bad", ["", "01", "1.0", "1:2", "1..2", "a", "1.2.3:1.", "1.1:1.1", "-1"])
def test_non_canonical_labels_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_label(bad)
