"""What the ``PreToolUse`` hook (:mod:`.hooks`) answers for a tool call of a replayed run
(``agenttrace.replaying``; docs/design/replay.md), once ``Reentry.plan`` has applied the
replay's rules to it.

The CLI runs the tools, and its hook protocol has no answer that gives a call a result without
running it: ``PreToolUse`` may allow, deny or rewrite the input, ``PostToolUse`` comes after the
body ran. So:

- a call the recording answers (``replay``) is **denied** with the recorded result as the
  reason: the tool's body does not run, and the model gets the recorded result text as the
  call's result, marked as an error and after the CLI's prefix (``PreToolUse:Bash hook error:
  ``): what the protocol cannot keep. The call's span
  says ``agenttrace.replayed``, its journal line is ``replayed``, and the replay counts it
  served;
- a call a strict replay diverges at (``diverge``) is denied with the
  :class:`~agenttrace.model.replay.ReplayDivergence`'s message, and the hook asks the CLI to
  stop the exchange there (``continue: false``): an exception raised in the hook would reach
  the CLI as a failed hook, not the program. The divergence is in the replay's report
  (``replay.report.divergence``), which the rules filled when they planned it;
- a call that runs live (lenient after a divergence, from ``until`` on, a recorded failure)
  is journaled as any call and not answered: ``Reentry.plan`` returned ``run`` for it.
"""

from __future__ import annotations

from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.model.reentry import Plan
from agenttrace.session.replay import copy_served_body
from agenttrace.tracing.journal.steps import Pending
from agenttrace.tracing.scopes import OpScope

from .utils import deny, result_text


def answers(plan: Plan) -> bool:
    """Whether the hook answers a replayed call planned so (served, or a strict divergence)."""
    return plan.what in ("replay", "diverge")


def answer(plan: Plan) -> dict[str, Any]:
    """The hook's answer for a replayed call ``plan`` serves or diverges at (see
    :func:`answers`)."""
    if plan.what == "replay":
        return deny(recorded_text(plan))
    reason = f"agenttrace: {plan.result}"
    return {**deny(reason), "continue_": False, "stopReason": reason}


def recorded_text(plan: Plan) -> str:
    """The recorded result of a served call, as the text the CLI gave the model then."""
    return result_text(plan.result)


def served(op: OpScope, pending: Pending) -> None:
    """The call ``op`` was answered from the recording: it says so, and ends as ``replayed``;
    what its body logged in the recording is copied into the replay session."""
    pending.served = True
    op.set_attribute(sc.REPLAYED, True)
    copy_body(op.session.run.session, pending, op)


def copy_body(session: Any, pending: Pending, op: OpScope | None = None) -> None:
    """What the body of the served call ``pending`` (``op``'s, once the program has its
    message) logged in the recording, copied into the replay session ``session``
    (``agenttrace.session.replay.copy_served_body``)."""
    try:
        call_message = op.call_message if op is not None else None
        copy_served_body(session, pending.reentry, pending.plan.step, call_message, at=op)
    except Exception as exc:
        report_internal_error("claude agent sdk replay", exc)
