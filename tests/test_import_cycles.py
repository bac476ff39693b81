"""tools/import_cycles.py, which ``make lint`` runs: it finds import cycles that import-linter's
``acyclic_siblings`` does not (an import inside a function, a package's ``__init__`` and one of
its modules), and agenttrace has none."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "import_cycles", ROOT / "tools" / "import_cycles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


checker = _checker()


def _package(root: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``root`` with ``files`` (paths inside it -> source)."""
    package = root / "pkg"
    for name, source in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return package


def test_a_cycle_through_an_import_inside_a_function_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": """\
                def later():
                    from pkg.high import helper  # only when called: still a cycle
                    return helper
                """,
            "high.py": "from pkg import low\n\ndef helper():\n    return low\n",
        },
    )
    assert checker.main([str(package)]) == 1
    error = capsys.readouterr().err
    assert "pkg.low -> pkg.high (" in error and "low.py:2)" in error
    assert "pkg.high -> pkg.low (" in error and "high.py:1)" in error


def test_a_package_and_its_own_module_importing_each_other_fail(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "sub/__init__.py": "from .worker import run\n\ndef setup():\n    pass\n",
            "sub/worker.py": "def run():\n    from . import setup\n    setup()\n",
        },
    )
    (cycle,) = checker.cycles(checker.edges(package))
    assert {(edge.importer, edge.imported) for edge in cycle} == {
        ("pkg.sub", "pkg.sub.worker"),
        ("pkg.sub.worker", "pkg.sub"),
    }


def test_imports_that_go_one_way_pass(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.high import helper\n",
            "low.py": "import json\n\nVALUE = 1\n",
            # importing pkg.low is not importing pkg, though Python runs pkg/__init__.py first
            "high.py": "def helper():\n    import pkg.low\n    return pkg.low.VALUE\n",
        },
    )
    assert checker.cycles(checker.edges(package)) == []
    assert checker.main([str(package)]) == 0


def test_agenttrace_has_no_import_cycle() -> None:
    found = checker.cycles(checker.edges(ROOT / "agenttrace"))
    assert found == [], "\n".join(checker.describe(cycle, ROOT) for cycle in found)
