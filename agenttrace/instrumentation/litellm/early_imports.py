"""Names bound to litellm's functions before agenttrace patched them, found once, and said.

``from litellm import completion`` copies the function into the importing module: if that ran
before agenttrace patched litellm, calls through the copy are never traced, silently. When
agenttrace patches a litellm that was already imported, it looks for such copies: every module's
namespace (``sys.modules``) is searched for the original function objects, by identity, so an
alias (``from litellm import completion as ask``) is found too. Measured with litellm and
agenttrace loaded (some 2,900-3,200 modules, 55,000 names): 8-15 ms at best, medians of 10-25 ms
on a busy two-core machine, once, and only when litellm was imported first; when litellm is
imported after ``init()``, the patch comes first and nothing needs looking for.
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType
from typing import Any

logger = logging.getLogger("agenttrace")

# The entry points a program imports by name; litellm's own modules and ours are not the program.
ENTRY_POINTS = (
    "completion",
    "acompletion",
    "embedding",
    "aembedding",
    "completion_with_retries",
    "acompletion_with_retries",
)
_SKIPPED = ("litellm", "agenttrace")
_SHOWN = 3


def originals(litellm: Any) -> frozenset[int]:
    """The ``id`` of each of litellm's entry points as it is now (read before patching)."""
    functions = (getattr(litellm, name, None) for name in ENTRY_POINTS)
    return frozenset(id(function) for function in functions if function is not None)


def holders(ids: frozenset[int]) -> list[str]:
    """``module.name`` for each name, in a module outside litellm and agenttrace, bound to one of
    the functions ``ids`` are of (identities stay valid: the patch's wrappers keep them alive)."""
    found = []
    seen: set[int] = set()
    for module_name, module in list(sys.modules.items()):
        # Modules only: some entries are other objects whose __dict__ is built on each read
        # (cffi's compiled libraries: hundreds of names).
        if not isinstance(module, ModuleType) or module_name.partition(".")[0] in _SKIPPED:
            continue
        # A module under two names is named once: multiprocessing (which agenttrace imports)
        # makes __mp_main__ an alias of __main__.
        if id(module) in seen:
            continue
        seen.add(id(module))
        namespace = vars(module)
        items = list(namespace.items())  # one step: another thread may be importing meanwhile
        found += [f"{module_name}.{name}" for name, value in items if id(value) in ids]
    return found


def warn_about(places: list[str]) -> None:
    """One warning naming the unpatched copies and the fixes."""
    if not places:
        return
    shown = ", ".join(places[:_SHOWN])
    more = f" and {len(places) - _SHOWN} more" if len(places) > _SHOWN else ""
    logger.warning(
        "agenttrace: calls through %s%s are not traced: bound to litellm's functions before "
        "agenttrace patched litellm. Call them through the module (import litellm; "
        "litellm.completion(...)), or call agenttrace.init() before `from litellm import ...` "
        "runs.",
        shown,
        more,
    )
