"""The instrumentor of an LLM client SDK whose calls are traced as litellm's attempts.

The OpenAI and Anthropic SDK instrumentations patch a table of methods on the SDK's classes
and record each call through the litellm instrumentation's attempts and logical calls, so they
are unpatched alike: while litellm is still patched, its calls (which reach these SDKs) still
run in the implicit runs and pending calls that unpatching would otherwise end.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agenttrace.instrumentation.base import (
    NO_OTHER_LIBRARY,
    LibraryInstrumentor,
    PatchState,
    class_attributes,
    unwrap_attributes,
    wrap_attributes,
)
from agenttrace.instrumentation.litellm.calls import forget_pending_calls
from agenttrace.instrumentation.litellm.utils import state as litellm_state
from agenttrace.tracing.implicit import end_runs


class SDKInstrumentor(LibraryInstrumentor):
    """An instrumentor that wraps :attr:`targets` on the SDK's classes (see the module
    docstring); a subclass names the SDK's releases, its targets and its state."""

    # Setting agenttrace up instruments no other library: each has its own instrumentor, which
    # zero-code loads too.
    init_options: ClassVar[dict[str, Any] | None] = NO_OTHER_LIBRARY
    targets: ClassVar[tuple[tuple[str, str, str, Any], ...]] = ()
    """(module, class, method, wrapper) patched, on the class that defines the method."""
    targets_missing_ok: ClassVar[bool] = False
    """Whether a target module or class the installed release lacks is passed over."""
    patch_state: ClassVar[PatchState]
    """The instrumentation's shared state, which its wrappers read."""

    def patch(self, **options: Any) -> None:
        """Patch the SDK's :attr:`targets` (imports it)."""
        if self.patch_state.patches:
            return
        targets = class_attributes(self.targets, missing_ok=self.targets_missing_ok)
        wrap_attributes(self.patch_state, targets)

    def unpatch(self) -> None:
        """Put the SDK back as it was. If another instrumentation wrapped it on top of ours,
        our layer stays inside theirs but passes calls straight through."""
        self.patch_state.enabled = False
        if not litellm_state.patches:  # else litellm's calls still run in them
            end_runs()  # the implicit runs of bare calls: no more calls will join them
            forget_pending_calls()
        unwrap_attributes(self.patch_state)

    def patched(self) -> bool:
        """Whether the SDK is patched."""
        return bool(self.patch_state.patches)
