"""The library's shape (issue 31): small files, and imports that never go round in a circle."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "python" / "sparkfleet"
_spec = importlib.util.spec_from_file_location("import_graph", LIBRARY.parents[1] / "scripts" / "import_graph.py")
assert _spec and _spec.loader
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)
MAX_LINES = 450


def modules() -> dict[str, Path]:
    return {name: path for name, path in import_graph.modules().items() if name}


def test_no_library_file_is_over_its_line_budget() -> None:
    sizes = {str(path.relative_to(LIBRARY)): len(path.read_text().splitlines()) for path in LIBRARY.rglob("*.py")}
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}


def test_the_library_has_no_import_cycle() -> None:
    graph = import_graph.graph()
    assert import_graph.cycle(graph) is None
    assert "planning.choices" in graph["planning.planner"]
    # The check finds a circle where there is one.
    assert import_graph.cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


# The wings from the ground up (docs/architecture.md): a wing imports only those below it.
WINGS = ("models", "reading", "kv", "planning", "hostconfig", "doctor", "boundary")


def test_each_wing_imports_only_the_wings_below_it() -> None:
    graph = import_graph.graph()
    upward = {
        f"{name} -> {other}"
        for name, targets in graph.items()
        for other in targets
        if (a := name.split(".", 1)[0]) in WINGS
        and (b := other.split(".", 1)[0]) in WINGS
        and WINGS.index(b) > WINGS.index(a)
    }
    assert upward == set()


MAX_FUNCTION_LINES = 80
# Functions allowed past MAX_FUNCTION_LINES, each at most its length here; issue 48 shortened the last eight into named
# stages, and one listed again must say why. One that is shortened comes off the list (the test says when).
LONG_FUNCTIONS: dict[str, int] = {}


def function_lengths() -> dict[str, int]:
    found: dict[str, int] = {}
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                qualified = f"{name.removesuffix('.__init__')}.{node.name}"
                found[qualified] = max(found.get(qualified, 0), node.end_lineno - node.lineno + 1)
    return found


def test_functions_are_short_and_the_long_ones_only_shrink() -> None:
    lengths = function_lengths()
    too_long = {name: n for name, n in lengths.items() if n > LONG_FUNCTIONS.get(name, MAX_FUNCTION_LINES)}
    assert too_long == {}, f"over {MAX_FUNCTION_LINES} lines (or longer than listed): {too_long}"
    shortened = {name for name, limit in LONG_FUNCTIONS.items() if lengths.get(name, 0) <= MAX_FUNCTION_LINES}
    assert shortened == set(), f"now within {MAX_FUNCTION_LINES} lines: take them off LONG_FUNCTIONS: {shortened}"


ROLES = LIBRARY.parents[1] / "roles"


def test_role_tasks_hold_no_jinja_programs() -> None:
    """Issue 48: a role's tasks are declarations; a loop, a branch or an accumulator in Jinja ({% ... %}) is a
    program, which belongs in the library where it is tested (a template of the role may hold them)."""
    programs = {
        str(path.relative_to(ROLES)): text.count("{%")
        for path in sorted([*ROLES.glob("*/tasks/*.yml"), *ROLES.glob("*/handlers/*.yml")])
        if "{%" in (text := path.read_text())
    }
    assert programs == {}, f"Jinja statements in role tasks: {programs}"
