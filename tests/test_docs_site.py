"""The documentation site builds with ``mkdocs build --strict`` (``make docs``, and CI), its
reference pages are generated from the code and cover it, and a broken link fails the build.

The CLI page must name every command ``agenttrace --help`` lists, the settings page every
``AGENTTRACE_*`` variable the package reads, the API page every name in ``agenttrace.__all__``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import agenttrace

from .helpers import ROOT

MKDOCS = Path(sys.executable).parent / "mkdocs"


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, as ``make docs`` runs it."""
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        timeout=300,
    )


def page_text(site: Path, page: str) -> str:
    """A built page's article, its tags dropped (what a reader sees)."""
    html = (site / page / "index.html").read_text(encoding="utf-8")
    article = html.split("<article", 1)[1].split("</article>", 1)[0]
    return re.sub(r"<[^>]+>", "", article)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    result = build(ROOT / "mkdocs.yml", target)
    assert result.returncode == 0, result.stderr
    return target


def commands_in_help() -> list[str]:
    """The commands ``agenttrace --help`` lists (its "Commands:" section)."""
    shown = subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    section = shown.split("\nCommands:\n", 1)[1]
    return re.findall(r"^  (\S+)", section, flags=re.MULTILINE)


def variables_the_package_reads() -> set[str]:
    """Every ``AGENTTRACE_*`` string literal in the package's code (docstrings and messages
    that only mention one are not literals equal to its name)."""
    found = set()
    for path in Path(agenttrace.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"AGENTTRACE_[A-Z0-9_]+", node.value)
            ):
                found.add(node.value)
    return found


@pytest.mark.e2e
def test_the_cli_page_documents_every_command(site: Path) -> None:
    commands = commands_in_help()
    assert len(commands) >= 10, commands  # the section was found and parsed
    text = page_text(site, "reference/cli")
    for command in commands:
        assert f"agenttrace {command}" in text, f"the CLI reference lacks `agenttrace {command}`"


@pytest.mark.e2e
def test_the_settings_page_names_every_variable_the_package_reads(site: Path) -> None:
    variables = variables_the_package_reads()
    assert {"AGENTTRACE_JOURNAL", "AGENTTRACE_SERVE_TOKEN"} <= variables
    text = page_text(site, "reference/settings")
    assert "<!-- settings: generated -->" not in text
    missing = sorted(name for name in variables if name not in text)
    assert not missing, f"docs/reference/settings.md does not name {missing}"
    # The table is the code's: a default and the variable a field is set by, read from it.
    assert re.search(r"journal\s+AGENTTRACE_JOURNAL\s+true", text), text
    assert re.search(r"max_payload_bytes\s+AGENTTRACE_MAX_PAYLOAD_BYTES\s+16384", text)
    assert "AGENTTRACE_SHUTDOWN_TIMEOUT, else OTEL_EXPORTER_OTLP_TRACES_TIMEOUT" in text


@pytest.mark.e2e
def test_the_api_page_documents_the_public_api(site: Path) -> None:
    html = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    documented = set(re.findall(r'id="agenttrace\.(\w+)"', html))
    assert {"resume", "tool"} <= documented
    assert set(agenttrace.__all__) <= documented, set(agenttrace.__all__) - documented


@pytest.mark.e2e
def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copytree(ROOT / "tools", copy / "tools")
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text() + "\n[gone](how-to/no-such-page.md)\n")
    result = build(copy / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr, result.stderr


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "tools" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Page:
    class file:
        src_uri = "reference/settings.md"


def test_an_undocumented_variable_fails_the_settings_page(monkeypatch: pytest.MonkeyPatch) -> None:
    from mkdocs.exceptions import PluginError

    hooks = _hooks()
    page = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    filled = hooks.on_page_markdown(page, _Page(), None, None)
    assert "| `journal` | `AGENTTRACE_JOURNAL` | `true` |" in filled
    known = hooks.package_variables()
    monkeypatch.setattr(hooks, "package_variables", lambda: [*known, "AGENTTRACE_NEW_KNOB"])
    with pytest.raises(PluginError, match="AGENTTRACE_NEW_KNOB"):
        hooks.on_page_markdown(page, _Page(), None, None)
