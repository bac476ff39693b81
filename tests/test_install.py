"""How to install agenttrace, as the README, the command's hints and `make package-check` say
it: all the same, and all of it something that works before agenttrace is on the package index."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from agenttrace._internal.extras import EXTRA_PACKAGES, install_hint

from .helpers import ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11 or later


def _install_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]


def test_each_hint_names_what_pyproject_declares_for_its_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for extra, requirement in EXTRA_PACKAGES.items():
        declared = [r.split(";")[0].strip() for r in extras[extra]]
        assert declared == [requirement], extra


def test_the_readme_lists_each_extras_requirement_and_the_hint_as_printed() -> None:
    section = _install_section()
    for extra, requirement in EXTRA_PACKAGES.items():
        assert f"| `{extra}` | `{requirement}`" in section, extra
    assert install_hint("cli") in section
    assert "pip install -e ." in section
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in section


def test_no_message_sends_users_to_the_unpublished_name() -> None:
    unpublished = re.compile(r"pip install '?agenttrace-otel")
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "agenttrace").rglob("*.py")
        if unpublished.search(path.read_text())
    ]
    assert offenders == []


def test_package_check_expects_the_hint_the_command_prints() -> None:
    assert install_hint("cli") in (ROOT / "Makefile").read_text()


def test_without_rich_the_command_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agenttrace.cli import needs_rich

    monkeypatch.setitem(sys.modules, "rich", None)  # how Python marks a module as missing
    with pytest.raises(SystemExit) as exited:
        needs_rich("tree")
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "agenttrace: error: `agenttrace tree` draws with rich: "
        "pip install 'rich>=13,<16' (the [cli] extra)\n"
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("program", "options", "passes"),
    [
        ("print('fine')", [], True),
        # An error at exit: the status stays 0, the traceback shows only on stderr.
        ("import sys; sys.stderr.write('Traceback (most recent call last):\\n')", [], False),
        ("import sys; sys.exit(2)", [], False),
        ("import sys; sys.stderr.write('hint\\n'); sys.exit(2)", ["--status", "2"], True),
        ("import sys; sys.exit(2)", ["--status", "2", "--stderr-has", "hint"], False),
    ],
)
def test_a_package_check_step_fails_on_a_traceback_or_a_wrong_status(
    program: str, options: list[str], passes: bool
) -> None:
    command = [sys.executable, "-c", program]
    step = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "package_step.py"), *options, "--", *command],
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert (step.returncode == 0) is passes, step.stderr
