"""Each instrumentor supports, from its floor on, the releases its extra in pyproject.toml allows.

``instrumentation_dependencies()`` is what ``opentelemetry-instrument`` checks before it
instruments a library: a floor older than the extra's would let it instrument a release the
tests never ran (make extras-range runs the extra's floor), a newer one would refuse a release
pip installs for the extra. So the two floors are the same, read from the one place each is
written; raising an extra's floor without its instrumentor's fails here.
"""

from __future__ import annotations

import importlib
import sys

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .helpers import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # the lock installs tomli on 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ENTRY_POINTS = PROJECT["entry-points"]["opentelemetry_instrumentor"]


def _floors(requirement: Requirement) -> set[str]:
    return {spec.version for spec in requirement.specifier if spec.operator == ">="}


def _extra_requirement(package: str) -> Requirement:
    """The requirement on `package` of the extra that installs it."""
    found = [
        Requirement(line)
        for lines in PROJECT["optional-dependencies"].values()
        for line in lines
        if canonicalize_name(Requirement(line).name) == canonicalize_name(package)
    ]
    assert len(found) == 1, f"{package}: no extra, or more than one, requires it"
    return found[0]


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_the_instrumentor_supports_its_extras_releases(entry: str) -> None:
    module, _, name = ENTRY_POINTS[entry].partition(":")
    instrumentor = getattr(importlib.import_module(module), name)()
    (dependency,) = instrumentor.instrumentation_dependencies()
    supported = Requirement(dependency)
    extra = _extra_requirement(supported.name)
    assert _floors(extra), f"[{extra}] has no floor"
    # Only a floor: an upper bound would make opentelemetry-instrument skip a newer release
    # with no word to the user, where agenttrace's own patches pass over what they do not find.
    assert str(supported.specifier) == f">={_floors(extra).pop()}", (dependency, str(extra))
