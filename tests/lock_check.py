"""Install a lock as the Makefile does, with the oldest pip each supported Python's venv ships.

`make lock-check` (run by CI) calls this. For each supported Python (3.10 and 3.11) it makes a new
venv with that interpreter, puts in it the pip that Python's first release bundled (3.10.0 shipped
pip 21.2.3, 3.11.0 shipped 22.3: later point releases ship newer ones, so these are the oldest a
user's `python -m venv` can give), installs the lock with the Makefile's own install arguments,
then runs `pip check`. Any error fails the run: a lock that only a current pip can install (a
locked package's extra resolved against the index, a wheel tag or metadata an old pip does not
read) fails here, not on a user's fresh machine. `make package-check` covers the other end: the
newest releases the extras allow.

The old pips themselves come from the index pinned by hash, like everything else installed.
"""

from __future__ import annotations

import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The oldest pip each supported Python's venv ships: (version, sha256 of its py3-none-any wheel).
OLDEST_PIP = {
    "3.10": ("21.2.3", "895df6014c2f02f9d278a8ad6e31cdfd312952b4a93c3068d0556964f4490057"),
    "3.11": ("22.3", "1daab4b8d3b97d1d763caeb01a4640a2250a0ea899e257b1e44b9eded91e15ab"),
}


class LockCheckFailed(Exception):
    """One step of installing the lock failed; the message says which and how."""


def find_interpreter(minor: str) -> str | None:
    """Return a CPython `minor` (e.g. "3.10") on this machine: on the PATH, else under pyenv."""
    candidates = [shutil.which(f"python{minor}")]
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    # pyenv's versions, newest point release first (3.10.13 before 3.10.9).
    found = glob.glob(os.path.join(pyenv_root, "versions", f"{minor}.*", "bin", f"python{minor}"))
    found.sort(
        key=lambda path: [int(p) for p in Path(path).parents[1].name.split(".")[:3] if p.isdigit()],
        reverse=True,
    )
    candidates += found
    for candidate in candidates:
        if candidate and _reports_minor(candidate, minor):
            return candidate
    return None


def _reports_minor(interpreter: str, minor: str) -> bool:
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    result = subprocess.run([interpreter, "-c", probe], capture_output=True, text=True)
    return result.returncode == 0 and result.stdout.strip() == minor


def _run(step: str, command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        # pip's last lines say what failed; before them it lists every requirement it read.
        output = "\n".join((result.stdout + result.stderr).strip().splitlines()[-12:])
        raise LockCheckFailed(f"{step} exited {result.returncode}: {shlex.join(command)}\n{output}")
    return result.stdout


def check_lock(
    interpreter: str, minor: str, lock: Path, install_args: list[str], work: Path
) -> str:
    """Install `lock` into a new venv of `interpreter` whose pip is the oldest `minor` ships."""
    pip_version, pip_sha256 = OLDEST_PIP[minor]
    venv = work / f"venv-{minor}"
    _run("making the venv", [interpreter, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    pin = work / f"pip-{minor}.txt"
    pin.write_text(f"pip=={pip_version} --hash=sha256:{pip_sha256}\n")
    _run(
        f"installing pip {pip_version}",
        [*pip, "install", "--no-deps", "--require-hashes", "-r", str(pin)],
    )
    shown = _run("asking pip its version", [*pip, "--version"])
    if not shown.startswith(f"pip {pip_version} "):
        raise LockCheckFailed(f"the venv's pip is not {pip_version}: {shown.strip()}")
    _run(f"installing {lock.name} with pip {pip_version}", [*pip, *install_args, "-r", str(lock)])
    _run("pip check", [*pip, "check"])
    return pip_version


def main(argv: list[str] | None = None) -> int:
    """Check every supported Python; exit 1 on the first failure, 0 when all installed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", type=Path)
    parser.add_argument(
        "--install-args", required=True, help="pip's install arguments, as the Makefile gives them"
    )
    parser.add_argument(
        "--python",
        action="append",
        choices=sorted(OLDEST_PIP),
        help="check only these (default: every supported Python)",
    )
    args = parser.parse_args(argv)
    install_args = shlex.split(args.install_args)
    for minor in args.python or sorted(OLDEST_PIP):
        interpreter = find_interpreter(minor)
        if interpreter is None:
            print(
                f"lock-check: no Python {minor} on this machine (looked on the PATH and under "
                f"pyenv); install it to check the lock there",
                file=sys.stderr,
            )
            return 1
        with tempfile.TemporaryDirectory(prefix=f"agenttrace-lock-check-{minor}-") as work:
            try:
                pip_version = check_lock(interpreter, minor, args.lock, install_args, Path(work))
            except LockCheckFailed as failure:
                print(
                    f"lock-check: {args.lock} does not install on Python {minor} "
                    f"({interpreter}): {failure}",
                    file=sys.stderr,
                )
                return 1
        print(
            f"lock-check: {args.lock} installs on Python {minor} ({interpreter}) "
            f"with pip {pip_version}, and pip check passes"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
