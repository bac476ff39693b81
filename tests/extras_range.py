"""Run each SDK's tests on the lowest and the newest release its extra allows.

The lock pins one release of each SDK, somewhere inside the range its extra in pyproject.toml
allows; the tests run there. `make extras-range` (CI runs it) covers the two ends of each range.
For every end it makes a new venv with the lock's uv, installs requirements.lock into it as the
Makefile does (`--no-deps --require-hashes`), then the end's own lock file,
tests/extras-range/<extra>-<end>.txt, the same way: that file pins the end release, and whatever
it needs that the lock does not give, with hashes, so every run installs the same files whatever
the index publishes meanwhile. Then agenttrace, editable, and that SDK's test files. It prints a
line per end (package, version, passed, failed, skipped) and fails when any test failed.

`make lock-range` writes the end files (`--compile`): each is `uv pip compile`d from the extra's
own requirement in pyproject.toml, at the lowest release it allows (`--resolution
lowest-direct`) or the newest, with every other package constrained to its version in the lock,
except the few an end lists in FREED: what that release needs differently (the lowest openai
needs a litellm older than the lock's). So an end's venv is the lock with one package moved,
and only what that package needs moved with it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # the lock installs tomli on 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
ENDS_DIR = ROOT / "tests" / "extras-range"
UV = ROOT / ".venv" / "bin" / "uv"
LOCKED_INSTALL = ["--no-deps", "--require-hashes"]
ENDS = ("lowest", "newest")


@dataclass(frozen=True)
class Extra:
    """An extra of pyproject.toml whose range is tested: its package and its tests."""

    name: str
    package: str
    tests: tuple[str, ...]


EXTRAS = {
    extra.name: extra
    for extra in (
        Extra("openai", "openai", ("tests/test_openai_sdk*.py",)),
        Extra("anthropic", "anthropic", ("tests/test_anthropic_sdk*.py",)),
        Extra("litellm", "litellm", ("tests/test_litellm.py", "tests/test_openai_sdk_litellm.py")),
        Extra(
            "smolagents",
            "smolagents",
            ("tests/test_smolagents.py", "tests/test_openai_sdk_smolagents.py"),
        ),
        Extra("openai-agents", "openai-agents", ("tests/test_openai_agents.py",)),
        Extra("pydantic-ai", "pydantic-ai-slim", ("tests/test_pydantic_ai.py",)),
    )
}

# (extra, end) -> requirements added to the end's compile, each freeing its package from the
# lock's pin: what that end's release needs that the lock does not give. A bare name that is
# another extra's package stands for that extra's requirement.
FREED: dict[tuple[str, str], tuple[str, ...]] = {
    # The openai tests import litellm (its costs, its calls through the SDK), and the lock's
    # litellm (1.105.0) wants openai>=2.20 and imports names older ones lack; of the releases the
    # [litellm] extra allows only 1.75.0-1.75.3 take an openai before 1.99.5. So the lowest
    # openai runs with the lowest litellm (lowest-direct resolves both to their floors).
    ("openai", "lowest"): ("litellm",),
    # litellm 1.110 wants a certifi newer than the lock's (>=2026.10.19); held to the lock's,
    # the newest end would stop at 1.106.
    ("litellm", "newest"): ("certifi",),
    # openai-agents 0.20 wants openai<3 (0.21 is the first to take the lock's 3.x), so a user on
    # openai 2 gets 0.20: the lowest end runs it with the lowest openai it takes (2.45).
    ("openai-agents", "lowest"): ("openai",),
    # Each pydantic-ai-slim release pins its own pydantic-graph (==), so the two move together
    # (on the Pythons [pydantic-ai] installs on: elsewhere lowest-direct would take 0.0.1).
    ("pydantic-ai", "lowest"): ("pydantic-graph ; python_version >= '3.11'",),
}


class RangeFailed(Exception):
    """A step of making or testing an end failed; the message says which and how."""


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _name(requirement: str) -> str:
    """The normalized package name a requirement (`pkg[extra]>=1,<2 ; marker`) names."""
    return _normalize(re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0])


def _run(step: str, command: list[str], cwd: Path | None = None) -> str:
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        output = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise RangeFailed(f"{step} exited {result.returncode}: {shlex.join(command)}\n{output}")
    return result.stdout


def extra_requirement(extra: Extra) -> str:
    """The extra's requirement on its package, as pyproject.toml spells it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["optional-dependencies"][extra.name]:
        if _name(requirement) == extra.package:
            return str(requirement)
    raise RangeFailed(f"the [{extra.name}] extra does not name {extra.package}")


def locked_pins(lock: Path) -> list[tuple[str, str]]:
    """The lock's `name==version ; marker` lines, as (normalized name, line)."""
    pins = []
    for line in lock.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)(\s*;[^\\]*)?", line)
        if match:
            pin = f"{match.group(1)}=={match.group(2)}{(match.group(3) or '').rstrip()}"
            pins.append((_normalize(match.group(1)), pin))
    return pins


def end_file(extra: Extra, end: str) -> Path:
    """The end's lock file."""
    return ENDS_DIR / f"{extra.name}-{end}.txt"


def pinned_version(path: Path, package: str) -> str:
    """The version `path` pins `package` to on this Python (the one the ends' venvs run).

    A universal lock may pin a package once per Python range (pydantic-ai-slim: one release
    below 3.11, another from 3.11); the pin whose marker holds here is the one installed.
    """
    for name, pin in locked_pins(path):
        requirement = Requirement(pin)
        if name == package and (requirement.marker is None or requirement.marker.evaluate()):
            return next(iter(requirement.specifier)).version
    raise RangeFailed(f"{path} does not pin {package} for this Python")


def compile_end(extra: Extra, end: str, work: Path) -> Path:
    """Write the end's lock file: the extra's package at that end, the rest as the lock has it."""
    packages = {other.package: other for other in EXTRAS.values()}
    freed = [
        extra_requirement(packages[name]) if name in packages else name
        for name in FREED.get((extra.name, end), ())
    ]
    free = {extra.package, *map(_name, freed)}
    source = work / f"{extra.name}-{end}.in"
    source.write_text("\n".join([extra_requirement(extra), *freed]) + "\n")
    constraints = work / "lock-constraints.txt"
    constraints.write_text(
        "\n".join(pin for name, pin in locked_pins(LOCK) if name not in free) + "\n"
    )
    target = end_file(extra, end)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Relative paths, so the `# via` notes uv writes name no temporary directory; a new output
    # file, since uv prefers the versions of the one it overwrites (a lowered floor would keep
    # the old lowest release).
    command = [
        str(UV), "pip", "compile", source.name, "--constraints", constraints.name,
        "--generate-hashes", "--universal", "--python-version", "3.10", "--no-header",
        "--resolution", "lowest-direct" if end == "lowest" else "highest",
        "--quiet", "-o", target.name,
    ]  # fmt: skip
    _run(f"compiling {target.name}", command, cwd=work)
    header = (
        f"# The {end} release [{extra.name}] allows, for make extras-range; written by make "
        f"lock-range\n# from {source.read_text().strip().replace(chr(10), ', ')}, every other "
        f"package constrained to requirements.lock.\n"
    )
    target.write_text(header + (work / target.name).read_text())
    return target


def check_end(extra: Extra, end: str, version: str) -> None:
    """Fail when `version` is outside the extra's range, or is not the floor of a lowest end.

    So an end file left behind by a change of the extra in pyproject.toml fails until make
    lock-range writes it again.
    """
    requirement = Requirement(extra_requirement(extra))
    if Version(version) not in requirement.specifier:
        raise RangeFailed(f"{extra.package} {version} is outside [{extra.name}]: make lock-range")
    floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    if end == "lowest" and floors and Version(version) != max(floors):
        raise RangeFailed(
            f"{extra.package} {version} is not the floor of [{extra.name}] "
            f"({requirement}): make lock-range"
        )


def end_is_the_locks(extra: Extra, end: str) -> bool:
    """Whether the end's file pins the extra's package to the lock's own version."""
    pins = end_file(extra, end)
    if not pins.exists():
        return False
    locked = pinned_version(LOCK, extra.package)
    if pinned_version(pins, extra.package) != locked:
        return False
    check_end(extra, end, locked)
    return True


@dataclass(frozen=True)
class Outcome:
    """What one end's tests gave."""

    extra: str
    end: str
    package: str
    version: str
    passed: int
    failed: int
    skipped: int
    seconds: float


def run_end(extra: Extra, end: str, work: Path) -> Outcome:
    """Install the lock with the end's file over it into a new venv; run the extra's tests."""
    started = time.monotonic()
    pins = end_file(extra, end)
    if not pins.exists():
        raise RangeFailed(f"{pins} is missing: make lock-range writes it")
    pinned = pinned_version(pins, extra.package)
    check_end(extra, end, pinned)
    venv = work / f"venv-{extra.name}-{end}"
    python = str(venv / "bin" / "python")
    _run(
        "making the venv",
        [str(UV), "venv", "--quiet", "--clear", "--python", sys.executable, str(venv)],
    )
    uv_pip = [str(UV), "pip", "install", "--quiet", "--python", python]
    _run("installing the lock", [*uv_pip, *LOCKED_INSTALL, "-r", str(LOCK)])
    _run(f"installing {pins.name}", [*uv_pip, *LOCKED_INSTALL, "-r", str(pins)])
    _run("installing agenttrace", [*uv_pip, "--no-deps", "--no-build-isolation", "-e", str(ROOT)])
    version = _run(
        f"asking {extra.package} its version",
        [python, "-c", f"import importlib.metadata as m; print(m.version({extra.package!r}))"],
    ).strip()
    if version != pinned:
        raise RangeFailed(f"the venv has {extra.package} {version}, {pins.name} pins {pinned}")
    tests = sorted({str(p.relative_to(ROOT)) for g in extra.tests for p in ROOT.glob(g)})
    report = work / f"{extra.name}-{end}.xml"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    pytest = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={report}"]
    result = subprocess.run([*pytest, *tests], cwd=ROOT, env=env, capture_output=True, text=True)
    if not report.exists():
        output = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise RangeFailed(f"pytest exited {result.returncode} without a report\n{output}")
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    total, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    if failed:
        # Each failure's error lines, then pytest's summary naming each failing test.
        lines = result.stdout.strip().splitlines()
        errors = [line for line in lines if line.startswith("E   ")][:40]
        summary = next((i for i, line in enumerate(lines) if "short test summary" in line), -20)
        print("\n".join([*errors, *lines[summary:]]), file=sys.stderr)
    return Outcome(
        extra.name,
        end,
        extra.package,
        version,
        total - failed - skipped,
        failed,
        skipped,
        time.monotonic() - started,
    )


def main(argv: list[str] | None = None) -> int:
    """Test (or, with --compile, lock) each end; exit 1 when any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extras", nargs="*", help=f"of {', '.join(EXTRAS)} (default: every one)")
    parser.add_argument("--end", action="append", choices=ENDS, help="default: both")
    parser.add_argument("--compile", action="store_true", help="write the end files (lock-range)")
    parser.add_argument("--keep", type=Path, help="make the venvs here and keep them (to debug)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.extras) - set(EXTRAS))
    if unknown:
        parser.error(f"no such extra here: {', '.join(unknown)}")
    status = 0
    for name in args.extras or list(EXTRAS):
        for end in args.end or ENDS:
            extra = EXTRAS[name]
            with tempfile.TemporaryDirectory(prefix=f"agenttrace-range-{name}-{end}-") as temp:
                work = args.keep or Path(temp)
                work.mkdir(parents=True, exist_ok=True)
                try:
                    marker = Requirement(extra_requirement(extra)).marker
                    if not args.compile and marker is not None and not marker.evaluate():
                        # The extra installs nothing on this Python ([pydantic-ai] on 3.10).
                        print(f"extras-range: [{name}] {end}: not on this Python ({marker})")
                        continue
                    if args.compile:
                        target = compile_end(extra, end, work)
                        version = pinned_version(target, extra.package)
                        print(f"lock-range: {target.relative_to(ROOT)}: {extra.package} {version}")
                        continue
                    if end_is_the_locks(extra, end):
                        # make test runs these very tests on the lock's release.
                        print(
                            f"extras-range: [{name}] {end}: {extra.package} "
                            f"{pinned_version(LOCK, extra.package)} is the lock's (make test)"
                        )
                        continue
                    outcome = run_end(extra, end, work)
                except RangeFailed as failure:
                    print(f"extras-range: [{name}] {end}: {failure}", file=sys.stderr)
                    status = 1
                    continue
            print(
                f"extras-range: [{name}] {end}: {outcome.package} {outcome.version}: "
                f"{outcome.passed} passed, {outcome.failed} failed, {outcome.skipped} skipped "
                f"({outcome.seconds:.0f} s)",
                flush=True,
            )
            if outcome.failed:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
