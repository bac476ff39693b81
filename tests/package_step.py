"""One step of `make package-check`: runs a command and fails when it exits with another status
than expected or prints a Python traceback on stderr (an error at exit shows only there: the
exit status stays 0). Standard library only: it runs before anything is installed.

    python tests/package_step.py [--status N] [--stderr-has TEXT] -- COMMAND [ARG ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

TRACEBACK = "Traceback (most recent call last)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--status", type=int, default=0, help="the exit status expected")
    parser.add_argument("--stderr-has", help="text the command's stderr must contain")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    result = subprocess.run(args.command, stderr=subprocess.PIPE, text=True, check=False)
    sys.stderr.write(result.stderr)  # shown as it was, whatever the verdict
    problems = []
    if result.returncode != args.status:
        problems.append(f"exit status {result.returncode}, not {args.status}")
    if TRACEBACK in result.stderr:
        problems.append("a traceback on stderr")
    if args.stderr_has is not None and args.stderr_has not in result.stderr:
        problems.append(f"no {args.stderr_has!r} on stderr")
    if problems:
        print(f"package-check: {' '.join(args.command)}: {'; '.join(problems)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
