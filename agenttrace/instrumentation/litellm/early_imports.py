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
from collections.abc import Mapping
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


def originals(litellm: Any) -> dict[int, str]:
    """``id -> name`` of litellm's entry points as they are now (read before patching)."""
    found = {}
    for name in ENTRY_POINTS:
        function = getattr(litellm, name, None)
        if function is not None:
            found[id(function)] = name
    return found


def holders(functions: Mapping[int, str]) -> list[str]:
    """``module.name`` for each name, in a module outside litellm and agenttrace, bound to one of
    ``functions`` (by ``id``: they are alive, held by litellm, while this runs)."""
    ids = functions.keys()
    found = []
    for module_name, module in list(sys.modules.items()):
        # Modules only: some entries are other objects whose __dict__ is built on each read
        # (cffi's compiled libraries: hundreds of names).
        if not isinstance(module, ModuleType) or module_name.partition(".")[0] in _SKIPPED:
            continue
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
        "agenttrace: %s%s hold litellm's functions as they were before agenttrace patched "
        "litellm: calls through them are not traced. Call them through the module "
        "(import litellm; litellm.completion(...)), or call agenttrace.init() before "
        "`from litellm import ...` runs.",
        shown,
        more,
    )
