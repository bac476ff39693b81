"""``agenttrace.forking``: a recorded run again, served from its recording up to a label and
run live from there with other settings, into a new session (docs/design/replay.md, "Fork").

A fork is a strict replay ``until`` its label (``agenttrace.session.replay``) carrying a
:class:`~agenttrace.model.fork.Fork`: the LLM calls made live from the label on are sent with
its overrides (``agenttrace.instrumentation.litellm.fork``), the new session's file names the
source (``meta.fork_of``, beside ``meta.replay_of``), and its root run's span links to the
source run's root span and says where it branched (``agenttrace.fork.*``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from agenttrace.model.fork import Fork, check_settings
from agenttrace.session.replay import Replay, check_arguments, replay_block
from agenttrace.session.state import AgentRecord, Session


@contextlib.contextmanager
def forking(
    session: str | Path,
    *,
    at: str,
    run: int | None = None,
    model: str | None = None,
    system_prompt: str | None = None,
    settings: Mapping[str, Any] | None = None,
    offline: bool = False,
    sessions_dir: str | Path | None = None,
    agent_factory: Callable[[AgentRecord, Session], Any] | None = None,
) -> Iterator[Replay]:
    """Fork a recorded run at the label ``at``: the code run inside the block (the source run's
    entry point, called as it was) is served from the source run's journal for every step
    before ``at`` (a call the recording does not answer there raises
    :class:`~agenttrace.model.replay.ReplayDivergence`), and runs ``at`` and everything after
    it live, into a new session made current for the block (``fork.session``).

    Each LLM call made live (through litellm, or the OpenAI or Anthropic SDK) is sent with the
    overrides: ``model`` instead of the program's; ``system_prompt`` as its system prompt (a
    chat request's first system or developer message, one put first if it has none; the
    Responses API's ``instructions``; Anthropic's ``system``); ``settings``, request keywords
    set on it (``{"temperature": 0.2}``; not ``messages``, ``stream``, ``model``, ``input``,
    ``system`` or ``instructions``). ``session``, ``run``, ``offline``,
    ``sessions_dir`` and ``agent_factory`` are :func:`~agenttrace.replaying`'s.
    """
    api = "agenttrace.forking"
    check_arguments(api, session, run, offline, sessions_dir, agent_factory)
    if not isinstance(at, str) or not at:
        raise TypeError(f"{api}: at must be a path label (str), not {at!r}")
    for name, value in (("model", model), ("system_prompt", system_prompt)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{api}: {name} must be a str, not {type(value).__name__}")
    if settings is not None and not isinstance(settings, Mapping):
        raise TypeError(f"{api}: settings must be a mapping, not {type(settings).__name__}")
    try:
        checked = check_settings(settings)
    except ValueError as exc:
        raise ValueError(f"{api}: {exc}") from None
    # The source's ids and root span are filled in once its files are read.
    fork = Fork("", "", at, model, system_prompt, checked)
    with replay_block(
        session, run, at, "strict", offline, sessions_dir, agent_factory, fork
    ) as replay:
        yield replay
