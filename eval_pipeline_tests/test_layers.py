"""Clean layers: the import contracts of pyproject.toml hold, and no module imports itself.

The contracts ([tool.importlinter]) say the domain packages import nothing from Dagster nor
from the Dagster/CLI layer. The cycle check is module by module, once counting the imports
under TYPE_CHECKING (a type-only cycle still ties the modules together for a reader and a
refactor) and once without. Both read the source; nothing is imported.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator

import grimp
import pytest
from importlinter.cli import lint_imports

from eval_pipeline.settings import REPO_DIR

PACKAGE = "eval_pipeline"


def test_import_contracts_hold() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = lint_imports(
            config_filename=str(REPO_DIR / "pyproject.toml"), no_cache=True, no_logo=True
        )
    assert code == 0, out.getvalue()


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan's
    algorithm, iterative: a deep import chain must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    work: list[tuple[str, Iterator[str]]] = []  # the depth-first path, each with what is left

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        work.append((module, iter(sorted(graph.find_modules_directly_imported_by(module)))))

    for root in sorted(graph.modules):
        if root in index:
            continue
        visit(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    visit(target)
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One cycle through the component's first module, as a chain of imports."""
    first = component[0]
    members = set(component)
    nxt = sorted(members & graph.find_modules_directly_imported_by(first))[0]
    back = graph.find_shortest_chain(importer=nxt, imported=first) or (nxt, first)
    return f"{{{', '.join(component)}}}: {' -> '.join((first, *back))}"


@pytest.mark.parametrize("type_checking", [True, False], ids=["with-type-checking", "runtime"])
def test_no_import_cycles(type_checking: bool) -> None:
    graph = grimp.build_graph(
        PACKAGE, exclude_type_checking_imports=not type_checking, cache_dir=None
    )
    cycles = [describe(graph, c) for c in strongly_connected(graph)]
    assert not cycles, f"{len(cycles)} import cycle(s) in {PACKAGE}:\n" + "\n".join(cycles)
