"""A forked child never writes the session files it inherited: they are its parent's, and a
child writing them would put back the state of the moment it was forked over whatever the
parent has written since."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .helpers import child_env

FORKING = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from opentelemetry.sdk.trace import TracerProvider
    import agenttrace
    from agenttrace.formats.session.files import snapshot_path

    sessions = Path(sys.argv[1])
    handle = agenttrace.init(
        tracer_provider=TracerProvider(), console="quiet", sessions_dir=sessions,
        billing_file=os.path.join(sessions, "accounting.jsonl"), std008_dir=sessions / "std008",
    )
    session = agenttrace.new_session("parent")
    sinks = {type(s).__name__: s for s in handle.processor.sinks}
    # The next writes are put off: the states stay dirty (and the STD-008 document due).
    sinks["SessionFileSink"].throttle.min_interval = 3600.0

    @agenttrace.agent("Jack")
    def run():
        return "done"

    run()
    handle.force_flush()
    sinks["Std008LiveSink"].throttle.min_interval = 3600.0
    path = snapshot_path(sessions, "parent")
    document = sessions / "std008" / "parent.std008.json"
    written = path.stat().st_ino, document.stat().st_ino
    run()  # its end asks for a write, put off for an hour
    handle.processor.worker.flush()  # consumed: the parent's state is changed and unwritten
    child = os.fork()
    if child == 0:
        agenttrace.force_flush()
        now = path.stat().st_ino, document.stat().st_ino
        os._exit(0 if now == written else 3 if now[0] != written[0] else 4)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code != 3, "the child rewrote the parent's session file"
    assert code != 4, "the child rewrote the parent's STD-008 document"
    assert code == 0, code
    handle.force_flush()  # the parent still writes its own
    assert path.stat().st_ino != written[0] and document.stat().st_ino != written[1]
    print("ok")
    """
)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this system")
def test_a_forked_child_leaves_its_parent_s_session_file_alone(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", FORKING, str(tmp_path / "sessions")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
