"""Finds every import cycle between the modules of a package, imports inside functions included.

``make lint`` runs it on ``agenttrace`` (docs/architecture.md, "Layers"). import-linter's graph
(grimp) does record imports inside functions, but its ``acyclic_siblings`` contract compares
only the children of each ancestor it is given: it never sees a package's ``__init__`` and one
of the package's own modules importing each other (``__init__`` is not a sibling of its
children), nor a cycle through a package left off its list. So this reads every module's
source (``ast``, without importing it) and takes every ``import`` statement anywhere in it, at
module level or inside a function, as an edge:

- ``import a.b.c`` and ``from a.b import c`` name the module ``a.b.c`` if the package has it,
  else the nearest enclosing module (``from a.b import name``: ``a.b``), as grimp does; a
  package's ``__init__`` is the module named after the package;
- importing ``a.b.c`` is not taken as importing the package ``a.b`` too, though Python runs
  ``a/b/__init__.py`` first: every module of a package would otherwise be in a cycle with an
  ``__init__`` that imports any of them;
- imports under ``if TYPE_CHECKING:`` count too (as import-linter counts them): a layer's
  types are as much a dependency as its code.

    python tools/import_cycles.py agenttrace    # exit 1 and one line per cycle, if any
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``imported`` at ``line`` of ``path``."""

    importer: str
    imported: str
    path: Path
    line: int


def modules(package: Path) -> dict[str, Path]:
    """Every module of the package in directory ``package``, by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def edges(package: Path) -> list[Edge]:
    """Every import of one of the package's modules by another, wherever it is written."""
    known = modules(package)
    found: list[Edge] = []
    for name, path in known.items():
        tree = ast.parse(path.read_bytes(), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, targets in _imports(tree, name, is_package):
            for target in targets:
                imported = _nearest(target, known)
                if imported is not None and imported != name:
                    found.append(Edge(name, imported, path, node.lineno))
    return found


def _imports(
    tree: ast.Module, module: str, is_package: bool
) -> Iterator[tuple[ast.stmt, list[str]]]:
    """Each import statement, at any depth, and the dotted names it may import: ``from x
    import y`` may name the module ``x.y`` or a name in ``x``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            if base is not None:
                yield (
                    node,
                    [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names],
                )


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The absolute name of the module a ``from ... import`` reads from."""
    if node.level == 0:
        return node.module
    parts = module.split(".")
    # ``from . import x`` in a package's __init__ is the package itself; in a module, its parent
    keep = len(parts) - node.level + (1 if is_package else 0)
    if keep <= 0:
        return None  # beyond the top: Python refuses it too
    base = ".".join(parts[:keep])
    return f"{base}.{node.module}" if node.module else base


def _nearest(name: str, known: dict[str, Path]) -> str | None:
    """``name`` if it is one of the modules, else the nearest enclosing one, else None."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def cycles(found: list[Edge]) -> list[list[Edge]]:
    """One cycle for each group of modules that import each other (a strongly connected
    component of two or more), as the edges around it, shortest first from its first module."""
    graph: dict[str, dict[str, Edge]] = {}
    for edge in found:
        graph.setdefault(edge.importer, {}).setdefault(edge.imported, edge)
    result: list[list[Edge]] = []
    for component in _components(graph):
        if len(component) > 1:
            result.append(_cycle_in(sorted(component), graph))
    return sorted(result, key=lambda cycle: cycle[0].importer)


def _components(graph: dict[str, dict[str, Edge]]) -> list[set[str]]:
    """Tarjan's strongly connected components, without recursion (a deep chain of imports
    would exceed Python's recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    nodes = set(graph) | {target for targets in graph.values() for target in targets}
    for root in sorted(nodes):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _cycle_in(component: list[str], graph: dict[str, dict[str, Edge]]) -> list[Edge]:
    """The shortest cycle through the component's first module (breadth first, inside it)."""
    start, members = component[0], set(component)
    came_by: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for target, edge in sorted(graph.get(node, {}).items()):
                if target not in members:
                    continue
                if target == start:
                    path = [edge]
                    while path[0].importer != start:
                        path.insert(0, came_by[path[0].importer])
                    return path
                if target not in came_by:
                    came_by[target] = edge
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start} in its own component")  # pragma: no cover


def describe(cycle: list[Edge], root: Path) -> str:
    """One cycle on one line: each import with where it is written."""

    def where(edge: Edge) -> str:
        try:
            shown = edge.path.relative_to(root)
        except ValueError:
            shown = edge.path
        return f"{edge.importer} -> {edge.imported} ({shown}:{edge.line})"

    return "; ".join(where(edge) for edge in cycle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("package", type=Path, help="the package's directory, e.g. agenttrace")
    args = parser.parse_args(argv)
    package = args.package.resolve()
    if not (package / "__init__.py").is_file():
        print(f"{args.package} is not a package's directory", file=sys.stderr)
        return 2
    found = cycles(edges(package))
    for cycle in found:
        print(f"import cycle: {describe(cycle, Path.cwd())}", file=sys.stderr)
    if found:
        return 1
    print(f"{package.name}: no import cycle, imports inside functions included")
    return 0


if __name__ == "__main__":
    sys.exit(main())
