"""litellm's raw calls: litellm makes every OpenAI-compatible request with
``with_raw_response``, from inside its own attempt (already passed through: one span). With
litellm's instrumentation off, its calls must stay untraced (turning it off is not undone by the
SDK's): a raw call that litellm's code makes is left alone (:func:`made_by_litellm`). A user's
raw calls are traced (:mod:`agenttrace.instrumentation.litellm.sdk_raw`).
"""

from __future__ import annotations

import sys

_OURS = (
    "openai",
    "agenttrace.instrumentation.",
    # Another instrumentation's wrapper of the SDK outside ours (contrib's openai-v2,
    # OpenLLMetry's): its frames are between litellm's and ours.
    "opentelemetry.instrumentation.",
    "opentelemetry.util.genai.",
    "wrapt",
)


def made_by_litellm() -> bool:
    """Whether the code that called the SDK (the first caller outside the SDK, this
    instrumentation and another's wrapping the SDK) is litellm's."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if not isinstance(name, str) or not name.startswith(_OURS):
            return isinstance(name, str) and (name == "litellm" or name.startswith("litellm."))
        frame = frame.f_back  # type: ignore[assignment]
    return False
