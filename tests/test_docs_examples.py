"""Every example in the documentation is tested: each ``python``, ``sh`` and ``console`` block of
README.md and of every page under docs/ is run here, taken from the page itself, so an edit that
breaks an example fails CI; or it is marked as not runnable here, with the reason.

Each such block is preceded by a marker, an HTML comment (invisible on GitHub and on the site):

- ``<!-- test: run -->``: a Python block runs as a program, in a fresh process in a scratch
  directory; a ``sh`` block line by line (its comments dropped) from the checkout; a ``console``
  block command by command (the lines after ``$ ``) in the scratch directory, each command's
  standard output compared with the lines the page shows under it, where it shows any (a line
  ``...`` stands for any lines). A command exits 0, unless its comment says ``exit status N``.
  All of them run offline, litellm on its bundled price map (``LITELLM_LOCAL_MODEL_COST_MAP``),
  with an OTLP receiver and an OpenAI-compatible scripted model on 127.0.0.1
  (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OPENAI_API_BASE``), the sessions directory and the ledger
  in the scratch directory, the Claude Agent SDK's CLI pointed at a scripted
  Anthropic-compatible server on 127.0.0.1, and ``tests/readme/`` and the checkout on
  ``PYTHONPATH`` (the ``framework`` that examples of "any framework's classes" import, and
  ``examples.scripted_model``). A program must exit 0 with no traceback on stderr, and one that
  calls ``agenttrace.init()`` must have exported spans. In a ``sh`` line, ``SESSION`` is a
  recorded session of the cafe demo, ``FILE`` a STD-008 document (the specification's example),
  ``PATH`` a file in the scratch directory and ``N`` a number; ``[--flag]`` runs the line with
  the flag and without it, ``a|b|c`` once with each.
- ``<!-- test: run with SESSION -->``: a Python block run with that session as its argument.
- ``<!-- test: saved as NAME -->``: a Python block written as ``NAME`` into the scratch
  directory of each ``console`` block after it on the same page, which runs it.
- ``<!-- test: covered by NAME -->``: run by another part of ``make test`` (``make
  package-check``, a named test), which the marker names.
- ``<!-- test: not run, REASON -->``: not runnable here (Docker, a real API key), with why.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from .anthropic_server import AnthropicServer
from .helpers import ROOT, child_env, record_demo
from .llm_server import LLMServer, Reply
from .otlp_receiver import OTLPReceiver

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FRAMEWORK = Path(__file__).resolve().parent / "readme"
_MARKER = re.compile(r"<!--\s*test:\s*(.*?)\s*-->", re.DOTALL)
_LANGUAGES = {"python": "python", "sh": "sh", "console": "console"}
_EXIT_STATUS = re.compile(r"exit status (\d+)")


@dataclass(frozen=True)
class Block:
    """A fenced block of a page: its page, language, text, first line and its marker's words."""

    page: Path
    language: str
    text: str
    line: int
    marker: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line} ({self.language})"

    @property
    def saved_as(self) -> str | None:
        """The file name a ``saved as NAME`` marker gives, else None."""
        found = re.fullmatch(r"saved as (\S+)", self.marker or "")
        return found.group(1) if found else None


def page_blocks(page: Path) -> list[Block]:
    """The page's ``python``, ``sh`` and ``console`` blocks, each with the marker in the HTML
    block right before it (if any): parsed with markdown-it, as GitHub renders them."""
    tokens = MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8"))
    blocks: list[Block] = []
    previous = None
    for token in tokens:
        words = token.info.split() if token.type == "fence" else []
        language = _LANGUAGES.get(words[0]) if words else None
        if language is not None:
            marker = None
            if previous is not None and previous.type == "html_block":
                found = _MARKER.search(previous.content)
                marker = found.group(1) if found else None
            line = (token.map[0] + 1) if token.map else 0
            blocks.append(Block(page, language, token.content, line, marker))
        previous = token
    return blocks


BLOCKS = [block for page in PAGES for block in page_blocks(page)]


def test_every_block_is_run_or_says_why_not() -> None:
    assert len(BLOCKS) >= 30  # the parse found the pages' blocks
    assert any(block.page.name == "tutorial.md" for block in BLOCKS)
    unmarked = [block.name for block in BLOCKS if block.marker is None]
    assert not unmarked, f"blocks with no <!-- test: ... --> marker before them: {unmarked}"
    for block in BLOCKS:
        marker = block.marker or ""
        if marker.startswith("not run"):
            assert re.match(r"not run, \S", marker), f"{block.name}: say why it is not run"
        elif marker.startswith("covered by"):
            assert re.match(r"covered by \S", marker), f"{block.name}: say what covers it"
        elif block.saved_as is not None:
            assert block.language == "python", f"{block.name}: only Python blocks are saved"
            later = [b for b in BLOCKS if b.page == block.page and b.line > block.line]
            assert any(b.language == "console" and b.marker == "run" for b in later), (
                f"{block.name}: saved, but no console block after it runs it"
            )
        else:
            assert marker in ("run", "run with SESSION"), f"{block.name}: unknown marker {marker}"


def test_the_readme_stays_a_front_door() -> None:
    """Short (issue 32: at most about 250 lines; issue 35's section on sessions across processes
    and hosts took it to some 285, issue 37's "Testing your agent" to 313), release notes in
    CHANGELOG.md, and the quick start a program the page runs."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 313
    assert "## What changed" not in readme
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    quick = [b for b in BLOCKS if b.page.name == "README.md" and b.saved_as == "quickstart.py"]
    assert quick, "the README's quick start is no longer saved and run"


def test_the_marker_check_finds_an_unmarked_block(tmp_path: Path) -> None:
    """The parse sees a marker only right before its block, and a block without one."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- test: run -->\n```python\nprint(1)\n```\n\ntext\n\n```console\n$ ls\n```\n"
    )
    first, second = page_blocks(page)
    assert (first.language, first.marker) == ("python", "run")
    assert (second.language, second.marker) == ("console", None)


@dataclass
class World:
    """What every block runs against, made once: a recorded cafe session (``SESSION``, copied
    for each block that names it, since ``agenttrace resume`` appends to it) and a STD-008
    document (``FILE``, the specification's example)."""

    sessions: Path
    document: Path


@dataclass
class Servers:
    """The servers one block talks to, its own, so blocks run at once without sharing a script
    or a span count: an OTLP receiver, a scripted OpenAI-compatible model, and a scripted
    Anthropic-compatible server the Claude Agent SDK's bundled CLI talks to."""

    receiver: OTLPReceiver
    model: LLMServer
    claude: AnthropicServer

    @classmethod
    def start(cls) -> Servers:
        claude = AnthropicServer()
        claude.start()
        return cls(OTLPReceiver().start(), LLMServer().start(), claude)

    def stop(self) -> None:
        self.receiver.stop()
        self.model.stop()
        self.claude.stop()


def _environment(servers: Servers, scratch: Path) -> dict[str, str]:
    model = f"{servers.model.base_url}/v1"
    return child_env(
        **servers.claude.env(home=scratch / "home"),
        OTEL_EXPORTER_OTLP_ENDPOINT=servers.receiver.http_endpoint,
        OPENAI_API_BASE=model,
        OPENAI_BASE_URL=model,
        OPENAI_API_KEY="sk-docs-test",
        AGENTTRACE_SESSIONS_DIR=str(scratch / "sessions"),
        AGENTTRACE_BILLING_FILE=str(scratch / "accounting.jsonl"),
        AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
        PYTHONPATH=os.pathsep.join([str(FRAMEWORK), str(ROOT)]),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )


def _script(servers: Servers, text: str) -> None:
    """What the scripted model answers: a call to a ``search`` tool first if the code has one,
    then plain replies (which a smolagents code agent reads as its final answer)."""
    servers.model.default = Reply(content=_FINAL_ANSWER)
    if "def search(" in text:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"query": "cafes"}'},
        }
        servers.model.script.append(Reply(content="", tool_calls=[call]))


_FINAL_ANSWER = "Thought: I know it.\n<code>\nfinal_answer('Paris')\n</code>"


def _check(block: Block, result: subprocess.CompletedProcess[str], what: str) -> None:
    assert result.returncode == 0, f"{block.name}: {what} exited {result.returncode}\n{result}"
    assert "Traceback" not in result.stderr, f"{block.name}: {what}\n{result.stderr}"


def _session_copy(world: World, scratch: Path) -> Path:
    """The recorded session, copied into ``scratch``: its session file's path there."""
    copy = scratch / "recorded"
    shutil.copytree(world.sessions, copy)
    (snapshot,) = copy.glob("*.json.gz")
    return snapshot


def _runs(language: str, *markers: str) -> list[Block]:
    return [b for b in BLOCKS if b.language == language and (b.marker or "") in markers]


def run_python(block: Block, world: World, scratch: Path) -> None:
    """Run a Python block as a program in ``scratch``; raise AssertionError if it fails."""
    servers = Servers.start()
    try:
        _script(servers, block.text)
        program = scratch / "block.py"
        program.write_text(block.text, encoding="utf-8")
        arguments = []
        if block.marker == "run with SESSION":
            arguments = [str(_session_copy(world, scratch))]
        result = subprocess.run(
            [sys.executable, str(program), *arguments],
            env=_environment(servers, scratch),
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=CHILD_GUARD,
        )
        _check(block, result, "the program")
        if "agenttrace.init(" in block.text:
            assert servers.receiver.wait_for(1, timeout=5), f"{block.name}: no span was exported"
    finally:
        servers.stop()


def shell_commands(block: Block, places: dict[str, str]) -> list[list[str]]:
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
                    choices.append([[], _filled(optional, places)])
                    optional = None
            elif word.startswith("[") and word.endswith("]"):
                choices.append([[], _filled([word[1:-1]], places)])
            elif word.startswith("["):
                optional = [word[1:]]
            elif "|" in word:
                choices.append([[option] for option in word.split("|")])
            else:
                choices.append([_filled([word], places)])
        assert optional is None, f"{block.name}: an unclosed [ in {raw}"
        for combination in itertools.product(*choices):
            commands.append([word for part in combination for word in part])
    return commands


def _filled(words: list[str], places: dict[str, str]) -> list[str]:
    """The words with each placeholder (``SESSION``, ``FILE``, ...) replaced by its value."""
    return [places.get(word, word) for word in words]


def run_shell(block: Block, world: World, scratch: Path) -> None:
    """Run a shell block's commands from the checkout, placeholders filled; raise
    AssertionError if one fails."""
    places = {
        "SESSION": str(_session_copy(world, scratch)),
        "FILE": str(world.document),
        "PATH": str(scratch / "out"),
        "N": "3",
    }
    commands = shell_commands(block, places)
    assert commands, f"{block.name}: no command in it"
    servers = Servers.start()
    try:
        for argv in commands:
            if argv[0] == "make":
                argv = ["make", "-s", "-C", str(ROOT), *argv[1:]]
            result = subprocess.run(
                argv,
                env=_environment(servers, scratch),
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=CHILD_GUARD,
            )
            _check(block, result, shlex.join(argv))
    finally:
        servers.stop()


@dataclass(frozen=True)
class Command:
    """One ``$`` line of a console block: what it runs, the exit status its comment announces,
    and the output the page shows under it."""

    line: str
    status: int
    output: tuple[str, ...]


def console_commands(block: Block) -> list[Command]:
    """The commands of a console block, each with the lines shown under it."""
    commands: list[Command] = []
    line: str | None = None
    output: list[str] = []
    for raw in [*block.text.splitlines(), "$ "]:
        if raw.startswith("$ "):
            if line is not None:
                found = _EXIT_STATUS.search(line.partition("#")[2])
                status = int(found.group(1)) if found else 0
                commands.append(Command(line, status, tuple(output)))
            line, output = raw[2:], []
        else:
            assert line is not None, f"{block.name}: output before any $ command"
            output.append(raw.rstrip())
    return [command for command in commands if command.line.strip()]


def matches(shown: tuple[str, ...], printed: list[str]) -> bool:
    """Whether the printed lines are those shown, a ``...`` line standing for any lines."""
    if not shown:
        return not printed
    head, *rest = shown
    if head == "...":
        return any(matches(tuple(rest), printed[i:]) for i in range(len(printed) + 1))
    return bool(printed) and printed[0] == head and matches(tuple(rest), printed[1:])


def test_console_output_matching() -> None:
    assert matches(("a", "...", "d"), ["a", "b", "c", "d"])
    assert matches(("...",), [])
    assert not matches(("a", "d"), ["a", "b", "d"])
    assert not matches(("a",), ["a", "b"])


def _run_console(block: Block, servers: Servers, directory: Path) -> None:
    """Run a console block's commands in ``directory`` with bash, as typed at a prompt, checking
    each one's exit status and the output the page shows."""
    _script(servers, block.text)
    for command in console_commands(block):
        result = subprocess.run(
            ["bash", "-c", command.line],
            env=_environment(servers, directory),
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=CHILD_GUARD,
        )
        if command.status:  # a crash the page announces may well print its traceback
            assert result.returncode == command.status, f"{block.name}: {command.line}\n{result}"
        else:
            _check(block, result, command.line)
        printed = [line.rstrip() for line in result.stdout.rstrip("\n").splitlines()]
        if command.output:
            assert matches(command.output, printed), (
                f"{block.name}: `{command.line}` printed\n{result.stdout}\n"
                "where the page shows\n" + "\n".join(command.output)
            )


def run_page(page: Path, world: World, scratch: Path) -> dict[int, str]:
    """Run a page's console blocks in order in one directory, as a reader works through the
    page, with the files the page saved before each: the failure of each block that failed
    (by its line), and of those after it, which did not run."""
    servers = Servers.start()
    failures: dict[int, str] = {}
    try:
        for block in [b for b in BLOCKS if b.page == page]:
            if block.saved_as is not None:
                (scratch / block.saved_as).write_text(block.text, encoding="utf-8")
            elif block.language == "console" and block.marker == "run":
                if failures:
                    failures[block.line] = f"not run: an earlier block of {page.name} failed"
                    continue
                try:
                    _run_console(block, servers, scratch)
                except AssertionError as failure:
                    failures[block.line] = str(failure)
    finally:
        servers.stop()
    return failures


def _unit(block: Block) -> str:
    """What runs a block: the block itself, or, for a console block, its whole page."""
    return str(block.page) if block.language == "console" else block.name


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[object]]]:
    """Every block the selected tests check, run at once in child processes (each block has
    servers of its own, each page its own directory), so the module takes about as long as its
    slowest page rather than the sum of all: its tests only wait for their results."""
    wanted = {
        item.callspec.params["block"]
        for item in request.session.items
        if item.module is request.module
        and hasattr(item, "callspec")
        and "block" in item.callspec.params
    }
    directory = tmp_path_factory.mktemp("docs")
    snapshot, _ = record_demo(directory)
    document = directory / "std008_example.json"  # the STD-008 specification's own example
    document.write_bytes((ROOT / "tests" / "data" / "std008_example_7_1.json").read_bytes())
    world = World(snapshot.parent, document)
    futures: dict[str, Future[object]] = {}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for block in sorted(wanted, key=lambda b: b.language != "console"):  # pages first
            key = _unit(block)
            if key in futures:
                continue
            scratch = tmp_path_factory.mktemp("block")
            if block.language == "console":
                futures[key] = pool.submit(run_page, block.page, world, scratch)
            elif block.language == "python":
                futures[key] = pool.submit(run_python, block, world, scratch)
            else:
                futures[key] = pool.submit(run_shell, block, world, scratch)
        yield futures


WORKERS = 4
"""Blocks run at once: most of a block's time is a child process starting (litellm's import),
the rest waits on servers, so a few more than a small machine's cores still gain."""

CHILD_GUARD = 480
"""Each child a block or page runs has this hang guard of its own (seconds)."""

waits_for_the_pool = pytest.mark.timeout(
    CHILD_GUARD
    * (len({_unit(b) for b in BLOCKS if (b.marker or "").startswith("run")}) // WORKERS + 2)
)
"""A test waits for its block's turn in the pool as well as for the block, so pytest-timeout's
600 s would fail it on a busy machine (it did, under make test's two workers on a loaded host)
where no block hangs: its bound is the pool's, each child keeping its own guard."""


@waits_for_the_pool
@pytest.mark.e2e  # runs whole programs as a user does: make test, not make check
@pytest.mark.parametrize("block", _runs("python", "run", "run with SESSION"), ids=lambda b: b.name)
def test_a_python_block_runs(block: Block, runs: dict[str, Future[object]]) -> None:
    runs[_unit(block)].result()


@waits_for_the_pool
@pytest.mark.e2e
@pytest.mark.parametrize("block", _runs("sh", "run"), ids=lambda b: b.name)
def test_a_shell_block_runs(block: Block, runs: dict[str, Future[object]]) -> None:
    runs[_unit(block)].result()


@waits_for_the_pool
@pytest.mark.e2e
@pytest.mark.parametrize("block", _runs("console", "run"), ids=lambda b: b.name)
def test_a_console_block_runs(block: Block, runs: dict[str, Future[object]]) -> None:
    """A console block runs after the page's earlier ones, in the page's directory, with the
    files the page saved before it."""
    failures = runs[_unit(block)].result()
    assert isinstance(failures, dict)
    assert block.line not in failures, failures[block.line]
