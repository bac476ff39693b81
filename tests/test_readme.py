"""The README is tested: every shell command and Python block in it runs here, taken from the
README itself, so an edit that breaks a block fails CI, or is marked as not runnable here with
the reason.

Each ``sh`` or ``python`` block is preceded by a marker, an HTML comment (invisible on GitHub):

- ``<!-- test: run -->``: a Python block runs as a program, a shell block line by line (its
  comments dropped), from a scratch directory, with an OTLP receiver and an OpenAI-compatible
  scripted model on 127.0.0.1 (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OPENAI_API_BASE``), the
  sessions directory in the scratch directory, the Claude Agent SDK's CLI pointed at a scripted
  Anthropic-compatible server on 127.0.0.1, and ``tests/readme/`` on ``PYTHONPATH`` (the
  ``framework`` that examples of "any framework's classes" import). It must exit 0 with no
  traceback on stderr, and a program that calls ``agenttrace.init()`` must have exported spans.
  In a shell line, ``SESSION`` is a recorded session of the cafe demo, ``FILE`` a STD-008
  document (the specification's example), ``PATH`` a file in the scratch directory and ``N`` a
  number; ``[--flag]`` runs the line with the flag and without it, ``a|b|c`` once with each.
- ``<!-- test: run with SESSION -->``: a Python block run with the session as its argument.
- ``<!-- test: covered by NAME -->``: run by another part of ``make test`` (``make
  package-check``, a named test), which the marker names.
- ``<!-- test: not run, REASON -->``: not runnable here (Docker, a real API key), with why.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from .anthropic_server import AnthropicServer
from .helpers import ROOT, child_env, record_demo
from .llm_server import LLMServer, Reply
from .otlp_receiver import OTLPReceiver

pytestmark = pytest.mark.e2e  # runs whole programs as a user does: make test, not make check

README = ROOT / "README.md"
FRAMEWORK = Path(__file__).resolve().parent / "readme"
_MARKER = re.compile(r"<!--\s*test:\s*(.*?)\s*-->", re.DOTALL)


@dataclass(frozen=True)
class Block:
    """A fenced block of the README: its language, text, first line and its marker's words."""

    language: str
    text: str
    line: int
    marker: str | None

    @property
    def name(self) -> str:
        return f"README.md:{self.line} ({self.language})"


def readme_blocks() -> list[Block]:
    """The README's ``sh`` and ``python`` blocks, each with the marker in the HTML block right
    before it (if any): parsed with markdown-it, as GitHub renders them."""
    tokens = MarkdownIt("commonmark").parse(README.read_text(encoding="utf-8"))
    blocks: list[Block] = []
    previous = None
    for token in tokens:
        if token.type == "fence" and token.info.split()[:1] in (["sh"], ["python"]):
            marker = None
            if previous is not None and previous.type == "html_block":
                found = _MARKER.search(previous.content)
                marker = found.group(1) if found else None
            line = (token.map[0] + 1) if token.map else 0
            blocks.append(Block(token.info.split()[0], token.content, line, marker))
        if token.type not in ("paragraph_close",):
            previous = token
    return blocks


BLOCKS = readme_blocks()


def test_every_block_is_run_or_says_why_not() -> None:
    assert len(BLOCKS) >= 10  # the parse found the README's blocks
    unmarked = [block.name for block in BLOCKS if block.marker is None]
    assert not unmarked, f"blocks with no <!-- test: ... --> marker before them: {unmarked}"
    for block in BLOCKS:
        marker = block.marker or ""
        if marker.startswith("not run"):
            assert re.match(r"not run, \S", marker), f"{block.name}: say why it is not run"
        elif marker.startswith("covered by"):
            assert re.match(r"covered by \S", marker), f"{block.name}: say what covers it"
        else:
            assert marker in ("run", "run with SESSION"), f"{block.name}: unknown marker {marker}"


@dataclass
class World:
    """What the blocks run against: a recorded cafe session (``SESSION``), a STD-008 document
    (``FILE``, the specification's example), an OTLP receiver and a scripted OpenAI-compatible
    model."""

    session: Path
    document: Path
    receiver: OTLPReceiver
    model: LLMServer
    claude: AnthropicServer
    """The Claude Agent SDK's bundled CLI talks to this one (``AnthropicServer.env``)."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    directory = tmp_path_factory.mktemp("readme")
    snapshot, _ = record_demo(directory)
    document = directory / "std008_example.json"  # the STD-008 specification's own example
    document.write_bytes((ROOT / "tests" / "data" / "std008_example_7_1.json").read_bytes())
    receiver, model, claude = OTLPReceiver().start(), LLMServer().start(), AnthropicServer()
    claude.start()
    try:
        yield World(snapshot, document, receiver, model, claude)
    finally:
        receiver.stop()
        model.stop()
        claude.stop()


def _environment(world: World, scratch: Path) -> dict[str, str]:
    model = f"{world.model.base_url}/v1"
    return child_env(
        **world.claude.env(home=scratch / "home"),
        OTEL_EXPORTER_OTLP_ENDPOINT=world.receiver.http_endpoint,
        OPENAI_API_BASE=model,
        OPENAI_BASE_URL=model,
        OPENAI_API_KEY="sk-readme-test",
        AGENTTRACE_SESSIONS_DIR=str(scratch / "sessions"),
        AGENTTRACE_BILLING_FILE=str(scratch / "accounting.jsonl"),
        AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
        PYTHONPATH=os.pathsep.join([str(FRAMEWORK), str(ROOT)]),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )


def _script(world: World, block: Block) -> None:
    """What the scripted model answers a block: a call to its ``search`` tool first if it has
    one, then plain replies (which a smolagents code agent reads as its final answer)."""
    world.claude.reset()
    model = world.model
    model.reset()
    model.default = Reply(content=_FINAL_ANSWER)
    if "def search(" in block.text:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"query": "cafes"}'},
        }
        model.script.append(Reply(content="", tool_calls=[call]))


_FINAL_ANSWER = "Thought: I know it.\n<code>\nfinal_answer('Paris')\n</code>"


def _check(block: Block, result: subprocess.CompletedProcess[str], what: str) -> None:
    assert result.returncode == 0, f"{block.name}: {what} exited {result.returncode}\n{result}"
    assert "Traceback" not in result.stderr, f"{block.name}: {what}\n{result.stderr}"


PYTHON_BLOCKS = [block for block in BLOCKS if block.language == "python"]
SHELL_BLOCKS = [block for block in BLOCKS if block.language == "sh"]


@pytest.mark.parametrize(
    "block", [b for b in PYTHON_BLOCKS if (b.marker or "").startswith("run")], ids=lambda b: b.name
)
def test_a_python_block_runs(block: Block, world: World, tmp_path: Path) -> None:
    _script(world, block)
    before = len(world.receiver.spans)
    program = tmp_path / "block.py"
    program.write_text(block.text, encoding="utf-8")
    arguments = [str(world.session)] if block.marker == "run with SESSION" else []
    result = subprocess.run(
        [sys.executable, str(program), *arguments],
        env=_environment(world, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    _check(block, result, "the program")
    if "agenttrace.init(" in block.text:
        assert len(world.receiver.spans) > before, f"{block.name}: no span was exported"


def shell_commands(block: Block, world: World, scratch: Path) -> list[list[str]]:
    """Each command of a shell block as argv lists: comments dropped, a line continued with
    ``\\`` joined, placeholders filled, ``[--flag]`` and ``a|b|c`` expanded."""
    text = block.text.replace("\\\n", " ")
    commands: list[list[str]] = []
    for raw in text.splitlines():
        words = shlex.split(raw, comments=True)
        if not words:
            continue
        choices: list[list[list[str]]] = []
        optional: list[str] | None = None
        for word in words:
            if optional is not None:  # inside [ ... ] of several words
                optional.append(word.removesuffix("]"))
                if word.endswith("]"):
                    choices.append([[], _filled(optional, world, scratch)])
                    optional = None
            elif word.startswith("[") and word.endswith("]"):
                choices.append([[], _filled([word[1:-1]], world, scratch)])
            elif word.startswith("["):
                optional = [word[1:]]
            elif "|" in word:
                choices.append([[option] for option in word.split("|")])
            else:
                choices.append([_filled([word], world, scratch)])
        assert optional is None, f"{block.name}: an unclosed [ in {raw}"
        for combination in itertools.product(*choices):
            commands.append([word for part in combination for word in part])
    return commands


def _filled(words: list[str], world: World, scratch: Path) -> list[str]:
    places = {
        "SESSION": str(world.session),
        "FILE": str(world.document),
        "PATH": str(scratch / "out"),
        "N": "3",
    }
    return [places.get(word, word) for word in words]


@pytest.mark.parametrize(
    "block", [b for b in SHELL_BLOCKS if b.marker == "run"], ids=lambda b: b.name
)
def test_a_shell_block_runs(block: Block, world: World, tmp_path: Path) -> None:
    commands = shell_commands(block, world, tmp_path)
    assert commands, f"{block.name}: no command in it"
    for argv in commands:
        env = _environment(world, tmp_path)
        if argv[0] == "make":
            argv = ["make", "-s", "-C", str(ROOT), *argv[1:]]
        result = subprocess.run(
            argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        _check(block, result, shlex.join(argv))
