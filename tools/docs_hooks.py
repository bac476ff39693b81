"""MkDocs hooks (mkdocs.yml, ``hooks:``): the settings reference is generated from the code at
every build, so it can never go stale.

docs/reference/settings.md holds the marker ``<!-- settings: generated -->``; this hook puts in
its place every ``agenttrace.init()`` argument with the variables that set it and its default,
the settings only a variable sets (the read limits), the command line's variables and any other
``AGENTTRACE_*`` variable the package reads. Nothing in the tables is typed here:

- the arguments and their order come from ``init``'s signature, and which ``Settings`` field each
  one sets from the ``Settings.resolve(...)`` call in ``init``'s source;
- which variables set a field is found by asking the code: ``Settings.resolve(env={VAR: value})``
  for every variable named in agenttrace/_internal/config.py and a set of probe values, and
  noting the fields that differ from the defaults; where several variables set one field, which
  wins is asked the same way (both set to values that alone give different settings: the one
  whose setting results wins, in most such pairs);
- defaults are the dataclass fields' own; meanings are the fields' docstrings, else the clause
  ``init``'s docstring gives the argument;
- the command line's variables come from its click options (``envvar=``).

The build fails (a ``PluginError``) when an ``AGENTTRACE_*`` variable that occurs anywhere in the
package is on none of the tables, so a new variable cannot go undocumented.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import logging
import re
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

MARKER = "<!-- settings: generated -->"
SETTINGS_PAGE = "reference/settings.md"
_VARIABLE = re.compile(r"\b(?:AGENTTRACE|OTEL)_[A-Z0-9_]*[A-Z0-9]\b")
_OWN_VARIABLE = re.compile(r"\bAGENTTRACE_[A-Z0-9_]*[A-Z0-9]\b")
# Values tried for each variable besides config.py's own short string constants (which hold
# the console modes, the effect classes, the capture modes): a flag each way, a number, a path,
# a name, a NAME=CLASS pair.
_PROBES = ("true", "false", "12345", "/probe", "probe", "probe=effect")
_MIB = 1 << 20


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: fill the settings page's marker with the generated tables."""
    if page.file.src_uri != SETTINGS_PAGE:
        return markdown
    if MARKER not in markdown:
        raise _plugin_error(f"{SETTINGS_PAGE} lost its marker {MARKER}")
    filled = markdown.replace(MARKER, settings_markdown())
    missing = sorted(set(package_variables()) - set(_OWN_VARIABLE.findall(filled)))
    if missing:
        raise _plugin_error(
            f"{SETTINGS_PAGE} names none of {', '.join(missing)}, which the package reads: give "
            "each a docstring (a Settings field's, or the attribute's that reads it) or an "
            "envvar= on its click option"
        )
    return filled


def _plugin_error(message: str) -> Exception:
    from mkdocs.exceptions import PluginError

    return PluginError(message)


def package_variables() -> list[str]:
    """Every ``AGENTTRACE_*`` name in the package's source (``AGENTTRACE_MAX_`` prefixes in
    prose left out: a name ends in a letter or digit)."""
    import agenttrace

    root = Path(agenttrace.__file__).parent
    found: set[str] = set()
    for path in root.rglob("*.py"):
        found.update(_OWN_VARIABLE.findall(path.read_text(encoding="utf-8")))
    return sorted(found)


def settings_markdown() -> str:
    """The generated tables, as Markdown."""
    from agenttrace._internal import config
    from agenttrace.sdk import setup

    fields = {field.name: field for field in dataclasses.fields(config.Settings)}
    limit_fields = {field.name: field for field in dataclasses.fields(config.ReadLimits)}
    docs = {
        **_attribute_docstrings(config.Settings),
        **{f"read_limits.{k}": v for k, v in _attribute_docstrings(config.ReadLimits).items()},
    }
    variables = variables_by_field(config)
    argument_field = _init_arguments_to_fields(setup.init)
    clauses = _docstring_clauses(inspect.getdoc(setup.init) or "")
    signature = inspect.signature(setup.init)

    rows = []
    for name, parameter in signature.parameters.items():
        field_name = argument_field.get(name)
        if field_name is not None:
            default = _field_default(fields[field_name])
            meaning = docs.get(field_name) or clauses.get(name, "")
        else:
            default = parameter.default
            meaning = clauses.get(name, "")
        rows.append(
            [
                f"`{name}`",
                _variables_cell(variables.get(field_name or "", [])),
                _default_cell(default),
                _one_line(meaning),
            ]
        )
    out = [_table(["`init()` argument", "variables", "default", "meaning"], rows)]

    reached = set(argument_field.values())
    env_only = []
    for name, field in fields.items():
        if name in reached:
            continue
        if name == "read_limits":
            for limit, limit_field in limit_fields.items():
                key = f"read_limits.{limit}"
                env_only.append(
                    [
                        f"`Settings.{key}`",
                        _variables_cell(variables.get(key, [])),
                        _default_cell(_field_default(limit_field)),
                        _one_line(docs.get(key, "")),
                    ]
                )
            continue
        env_only.append(
            [
                f"`Settings.{name}`",
                _variables_cell(variables.get(name, [])),
                _default_cell(_field_default(field)),
                _one_line(docs.get(name, "")),
            ]
        )
    out.append("\n### Set by variables only\n")
    out.append(
        "These have no `init()` argument: a variable sets them, or the conventions' variables "
        "the meaning names.\n"
    )
    out.append(_table(["setting", "variables", "default", "meaning"], env_only))

    unmapped = sorted(set(_VARIABLE.findall(_source(config))) - _all_mapped(variables))
    if unmapped:
        out.append(
            "\nAlso read by the settings, alongside a variable above: "
            + ", ".join(f"`{name}`" for name in unmapped)
            + ".\n"
        )

    out.append("\n### The command line\n")
    out.append(_table(["variable", "option", "default", "meaning"], list(_cli_rows())))

    documented = set(_OWN_VARIABLE.findall("\n".join(out)))
    others = [name for name in package_variables() if name not in documented]
    if others:
        out.append("\n### Other variables\n")
        out.append(_table(["variable", "read in", "meaning"], [_other_row(n) for n in others]))
    return "\n".join(out)


def variables_by_field(config: Any) -> dict[str, list[str]]:
    """``{field: [variable, ...]}``: the variables that change each ``Settings`` field (and each
    ``read_limits.*`` field), found by resolving settings with one variable set at a time."""
    source = _source(config)
    names = list(dict.fromkeys(_VARIABLE.findall(source)))  # in the order config.py names them
    probes = list(_PROBES) + sorted(_short_constants(source))
    quiet = logging.getLogger("agenttrace")
    was_disabled, quiet.disabled = quiet.disabled, True  # the probes' warnings are expected
    try:
        baseline = _flatten(config.Settings.resolve(env={}))
        found: dict[str, list[str]] = {}
        for name in names:
            changed: set[str] = set()
            for value in probes:
                try:
                    resolved = _flatten(config.Settings.resolve(env={name: value}))
                except (TypeError, ValueError):
                    continue
                changed.update(k for k, v in resolved.items() if v != baseline[k])
            for field in sorted(changed):
                found.setdefault(field, []).append(name)
        return {
            field: _by_precedence(config, field, names, probes) for field, names in found.items()
        }
    finally:
        quiet.disabled = was_disabled


def _by_precedence(config: Any, field: str, names: list[str], probes: list[str]) -> list[str]:
    """``names`` (the variables that set ``field``), the one that wins when both are set first."""

    def value(env: dict[str, str]) -> Any:
        return _flatten(config.Settings.resolve(env=env))[field]

    alone = {(name, probe): value({name: probe}) for name in names for probe in probes}
    wins = dict.fromkeys(names, 0)
    for first, second in itertools.combinations(names, 2):
        score = 0  # > 0: first wins more pairs of values than second
        for a, b in itertools.product(probes, probes):
            if alone[first, a] == alone[second, b]:
                continue
            both = value({first: a, second: b})
            score += (both == alone[first, a]) - (both == alone[second, b])
        wins[first if score > 0 else second] += 1
    return sorted(names, key=lambda name: -wins[name])


def _flatten(settings: Any) -> dict[str, Any]:
    values = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if dataclasses.is_dataclass(value):
            for inner in dataclasses.fields(value):
                values[f"{field.name}.{inner.name}"] = getattr(value, inner.name)
        else:
            values[field.name] = value
    return values


def _all_mapped(variables: Mapping[str, list[str]]) -> set[str]:
    return {name for names in variables.values() for name in names}


def _short_constants(source: str) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"[\w./-]{1,40}", node.value)
    }


def _source(obj: Any) -> str:
    return textwrap.dedent(inspect.getsource(obj))


def _attribute_docstrings(cls: type) -> dict[str, str]:
    """``{field: docstring}`` for the string literals that follow a class's annotated fields."""
    body = ast.parse(_source(cls)).body[0]
    assert isinstance(body, ast.ClassDef)
    docs = {}
    for statement, following in itertools.pairwise(body.body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _init_arguments_to_fields(init: Any) -> dict[str, str]:
    """``{init argument: Settings field}`` from the ``Settings.resolve(field=argument, ...)``
    call in ``init``'s source."""
    mapping = {}
    for node in ast.walk(ast.parse(_source(init))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "resolve"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "Settings"
        ):
            for keyword in node.keywords:
                if keyword.arg is not None and isinstance(keyword.value, ast.Name):
                    mapping[keyword.value.id] = keyword.arg
    if not mapping:
        raise _plugin_error("found no Settings.resolve(...) call in agenttrace.init's source")
    return mapping


def _docstring_clauses(doc: str) -> dict[str, str]:
    """``{name: text}`` for each ````name````: clause of a docstring's prose."""
    text = " ".join(doc.split())
    clauses = {}
    for match in re.finditer(r"``(\w+)``: (.*?)(?=(?:;|\.) ``\w+``: |\n|$)", text):
        clauses.setdefault(match.group(1), match.group(2).rstrip(" ;."))
    return clauses


def _field_default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def _default_cell(value: Any) -> str:
    if value is inspect.Parameter.empty or value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (frozenset, set, tuple, list, dict)) and not value:
        return "none"
    if isinstance(value, int) and value >= _MIB and value % _MIB == 0:
        mib = value // _MIB
        return f"{mib // 1024} GiB" if mib % 1024 == 0 else f"{mib} MiB"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def _variables_cell(names: list[str]) -> str:
    return ", else ".join(f"`{name}`" for name in names)


def _one_line(text: str) -> str:
    """``text`` on one line, Sphinx roles (``:class:`Name```) as plain code."""
    return re.sub(r":[a-z]+:`([^`]+)`", r"`\1`", " ".join(text.split()))


def _table(headers: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *map(line, rows)]) + "\n"


def _cli_rows() -> Iterator[list[str]]:
    """One row per variable a command-line option reads (``envvar=``), with the commands."""
    import click

    from agenttrace.cli import main

    by_variable: dict[str, tuple[click.Option, list[str]]] = {}
    for name, command in sorted(main.commands.items()):
        for parameter in command.params:
            envvar = getattr(parameter, "envvar", None)
            if isinstance(parameter, click.Option) and isinstance(envvar, str):
                by_variable.setdefault(envvar, (parameter, []))[1].append(name)
    for variable, (option, commands) in sorted(by_variable.items()):
        where = ", ".join(f"`agenttrace {command}`" for command in commands)
        help_text = option.help or ""
        shown = re.search(r"\[default: ([^\]]+)\]", help_text)
        default = f"`{shown.group(1)}`" if shown else _default_cell(option.default)
        meaning = re.sub(r"\s*\[default: [^\]]+\]", "", help_text)
        yield [f"`{variable}`", f"`{option.opts[-1]}` of {where}", default, _one_line(meaning)]


def _other_row(variable: str) -> list[str]:
    """A variable read outside the settings and the options: the module that reads it and the
    docstring of the attribute assigned from it."""
    import agenttrace

    root = Path(agenttrace.__file__).parent
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if variable not in source:
            continue
        body = ast.parse(source).body
        for statement, following in itertools.pairwise(body):
            if (
                isinstance(statement, (ast.Assign, ast.AnnAssign))
                and variable in (ast.get_source_segment(source, statement) or "")
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                module = path.relative_to(root.parent).with_suffix("").as_posix()
                meaning = _one_line(following.value.value)
                return [f"`{variable}`", f"`{module.replace('/', '.')}`", meaning]
    raise _plugin_error(
        f"{variable} is read somewhere in agenttrace but not by Settings, a click option or an "
        "attribute with a docstring: document it in one of those places"
    )
