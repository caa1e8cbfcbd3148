"""No import circles in i6_shard, between layers or inside one: every module's imports of i6_shard modules
(absolute or relative, at the top or inside a function) form a graph without cycles. Imports under
``if TYPE_CHECKING:`` are left out: they never run."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "i6_shard"


def _modules():
    """``{dotted name: path}`` of every module of the package (a package by its ``__init__.py``)."""
    out = {}
    for folder, dirs, names in os.walk(os.path.join(ROOT, PACKAGE)):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        for name in names:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, name), ROOT)[: -len(".py")].split(os.sep)
                out[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = os.path.join(folder, name)
    return out


def _is_type_checking(node):
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree):
    """Every Import/ImportFrom node, except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _targets(module, path, node, modules):
    """The i6_shard modules an import statement runs."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in modules]
    if node.level:
        package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
        for _ in range(node.level - 1):
            package = package.rsplit(".", 1)[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    if base != PACKAGE and not base.startswith(PACKAGE + "."):
        return []
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in modules else base)
    return [m for m in out if m in modules]


def import_graph():
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        graph[module] = sorted({t for node in _imports(tree) for t in _targets(module, path, node, modules)} - {module})
    return graph


def find_cycle(graph):
    """One cycle as ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, iters = [start], [iter(graph[start])]
        state[start] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(graph.get(nxt, ())))
    return None


@pytest.mark.slow
def test_the_graph_is_read():
    graph = import_graph()
    assert "i6_shard.core.io.file_list" in graph["i6_shard.core.io"]
    assert "i6_shard.core.pure.file_tree" in graph["i6_shard.core.io.file_list"]  # a relative import, two levels


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b"], "b": [], "c": ["a", "b"]}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)
