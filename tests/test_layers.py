"""The layers hold, read from the source (every import, at module top or inside a function):

    schemas  <  curation  <  annotation  <  flows

A layer imports only from layers below it; curation never imports Prefect or Label Studio (only annotation talks
to Label Studio, only flows to Prefect); no module imports, directly or through others, one that imports it back;
curation's subpackages form no cycle either, so each can be read knowing only those below it; and at most a few
modules stay loose at curation's top."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import REPO

LAYERS = ["schemas", "curation", "annotation", "flows"]
FORBIDDEN = {
    "schemas": ("prefect", "prefect_dask", "label_studio", "label_studio_sdk", "typer"),
    "curation": ("prefect", "prefect_dask", "label_studio", "label_studio_sdk", "typer"),
    "annotation": ("prefect", "prefect_dask", "typer"),
}
LOOSE_AT_MOST = 4


def modules() -> dict[str, Path]:
    found = {}
    for layer in LAYERS:
        for path in (REPO / layer).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(("benchcurate", *parts))
            found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """Everything the module imports: our modules by their full names, other packages by their top name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            if name.startswith("benchcurate."):
                if name in known:
                    found.add(name)
            else:
                found.add(name.split(".")[0])
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, set(found)) - {name} for name, path in found.items()}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_each_layer_imports_only_those_below_it_and_never_a_forbidden_package(graph):
    wrong = []
    for module, targets in graph.items():
        layer = layer_of(module)
        for target in targets:
            if (
                target.startswith("benchcurate.")
                and layer_of(target)
                and LAYERS.index(layer_of(target)) > LAYERS.index(layer)
            ):
                wrong.append(f"{module} imports {target}, a layer above it")
            if target in FORBIDDEN.get(layer, ()):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of nodes that reach each other (Tarjan), those of more than one node."""
    index, low, stack, on_stack, groups, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in list(edges):
        if node not in index:
            visit(node)
    return groups


def test_no_module_imports_one_that_imports_it_back(graph):
    ours = {module: {target for target in targets if target in graph} for module, targets in graph.items()}
    assert strongly_connected(ours) == []


def curation_package(module: str) -> str:
    """A curation module's subpackage (`benchcurate.curation.images`), or the module itself when loose."""
    return ".".join(module.split(".")[:3])


def test_curations_subpackages_form_no_cycle(graph):
    packages = defaultdict(set)
    for module, targets in graph.items():
        if layer_of(module) == "curation" and module != "benchcurate.curation":
            for target in targets:
                if layer_of(target) == "curation" and curation_package(target) != curation_package(module):
                    packages[curation_package(module)].add(curation_package(target))
    assert strongly_connected(packages) == []


def test_few_modules_stay_loose_at_curations_top():
    loose = sorted(path.name for path in (REPO / "curation").glob("*.py") if path.name != "__init__.py")
    assert len(loose) <= LOOSE_AT_MOST, loose
