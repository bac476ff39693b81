"""The thresholds of the lint rules: :class:`LintSettings`, a frozen dataclass with defaults,
changed by name (``agenttrace lint --set NAME=VALUE``, ``LintSettings().updated(...)``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass


class LintSettingError(ValueError):
    """A setting that does not exist, or a value it cannot take; the message is one line."""


@dataclass(frozen=True)
class LintSettings:
    """Thresholds of the rules (docs/lint.md says which rule reads which)."""

    repeat_min_calls: int = 3
    """AT101: this many identical tool calls (name, arguments, result) in a row, each asked in
    a turn of its own, are a loop."""
    failing_min_calls: int = 2
    """AT102: this many identical failing tool calls in a row."""
    pingpong_min_cycles: int = 2
    """AT103: A-B repeated this many times in a row (2: A-B-A-B)."""
    poll_min_calls: int = 4
    """AT104: this many calls of one tool in one turn, all with the same result."""
    max_attempts: int = 3
    """AT201: a logical LLM call may take this many attempts; one more is a retry storm."""
    min_backoff_ms: float = 50.0
    """AT202: a retry sent sooner than this after the attempt before it ended had no backoff
    (0 turns the rule off)."""
    idle_min_turns: int = 1
    """AT203: this many turns in a row that asked the model again with nothing new, after a
    turn that called no tool."""
    window_share: float = 0.8
    """AT204: an attempt whose input tokens pass this share of its model's context window."""
    context_window: int = 0
    """AT204: the context window to use for every model (0: litellm's offline model map's
    ``max_input_tokens``, the model skipped when the map does not know it)."""
    ignore: tuple[str, ...] = ()
    """Rule ids (``AT104``) or names (``polling-without-progress``) not to run."""

    def updated(self, assignments: Iterable[str]) -> LintSettings:
        """These settings with each ``NAME=VALUE`` of ``assignments`` applied (``ignore`` takes
        a comma-separated list); raises :class:`LintSettingError`."""
        fields = {field.name: field for field in dataclasses.fields(self)}
        changes: dict[str, object] = {}
        for assignment in assignments:
            name, equals, text = assignment.partition("=")
            name = name.strip().replace("-", "_")
            if not equals or name not in fields:
                known = ", ".join(sorted(fields))
                raise LintSettingError(f"{assignment!r}: expected NAME=VALUE, NAME one of {known}")
            changes[name] = _value(name, text.strip(), getattr(self, name))
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def as_json(self) -> dict[str, object]:
        """The settings, as ``--json`` prints them."""
        values = dataclasses.asdict(self)
        values["ignore"] = list(self.ignore)
        return values


def _value(name: str, text: str, default: object) -> object:
    if isinstance(default, tuple):
        return tuple(part.strip() for part in text.split(",") if part.strip())
    try:
        value: int | float = int(text) if isinstance(default, int) else float(text)
    except ValueError:
        kind = "an integer" if isinstance(default, int) else "a number"
        raise LintSettingError(f"{name}={text!r}: expected {kind}") from None
    if not value >= 0 or value == float("inf"):  # NaN fails the comparison too
        raise LintSettingError(f"{name}={text!r}: expected a finite number, 0 or more")
    return value
