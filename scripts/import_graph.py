"""The library's import graph: its size, its longest chain, any circle, and the imports between its wings.

    uv run python scripts/import_graph.py

Issue 48 asks for the graph before and after each move of the library into wings; tests/unit/test_layout.py holds
the graph to no circle with the same reading of the imports (relative ones resolved, `from . import x` included).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from functools import cache
from pathlib import Path

LIBRARY = Path(__file__).resolve().parent.parent / "python" / "sparkfleet"


def modules(library: Path = LIBRARY) -> dict[str, Path]:
    """Every module of the library by its dotted name under sparkfleet (a package by its own name)."""
    found = {}
    for path in sorted(library.rglob("*.py")):
        name = path.relative_to(library).with_suffix("").as_posix().replace("/", ".")
        found[name.removesuffix(".__init__") if name != "__init__" else ""] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The library modules `name` imports (relative imports resolved, `from . import x` included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".") if package else []
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join([*base, node.module] if node.module else base)
            candidates = [target] if node.module else []
            candidates += [f"{target}.{alias.name}".lstrip(".") for alias in node.names]
            found |= {c for c in candidates if c in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sparkfleet."):
            found |= {node.module.removeprefix("sparkfleet.")} & known
    return found - {name}


def graph(library: Path = LIBRARY) -> dict[str, set[str]]:
    table = modules(library)
    return {name: imports_of(name, path, set(table)) for name, path in table.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports, as the names round it, or None."""
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> list[str] | None:
        if name in trail:
            return [*trail[trail.index(name) :], name]
        if name in done:
            return None
        for other in sorted(edges[name]):
            found = visit(other, [*trail, name])
            if found:
                return found
        done.add(name)
        return None

    for name in sorted(edges):
        found = visit(name, [])
        if found:
            return found
    return None


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest path of imports (the graph has no circle)."""

    @cache
    def from_(name: str) -> tuple[str, ...]:
        best: tuple[str, ...] = ()
        for other in sorted(edges[name]):
            candidate = from_(other)
            if len(candidate) > len(best):
                best = candidate
        return (name, *best)

    return list(max((from_(name) for name in sorted(edges)), key=len, default=()))


def wing(name: str) -> str:
    return name.split(".", maxsplit=1)[0] if "." in name else f"{name or '__init__'} (top)"


def main() -> int:
    edges = graph()
    circle = cycle(edges)
    chain = [] if circle else longest_chain(edges)
    files = len(edges)
    packages = {name.split(".")[0] for name in edges if "." in name}
    top = [name for name in edges if "." not in name and name and name not in packages]
    print(f"library files {files}, import edges {sum(map(len, edges.values()))}")
    print(f"packages {len(packages)} ({', '.join(sorted(packages))}); top-level modules {len(top)}")
    print("cycles: " + (" -> ".join(circle) if circle else "none"))
    if chain:
        print(f"longest chain ({len(chain)} modules): {' -> '.join(chain)}")
    between = Counter(
        (wing(a), wing(b)) for a, targets in edges.items() for b in targets if wing(a) != wing(b) and "." in a and "." in b
    )
    print("imports between packages (from -> to: edges):")
    for (a, b), count in sorted(between.items()):
        print(f"  {a} -> {b}: {count}")
    return 1 if circle else 0


if __name__ == "__main__":
    sys.exit(main())
