"""The layers above the core (``jobs``, ``returnn_config``, ``returnn_ext``, ``cli.py``) import from the core only
through its faces (``i6_shard.core``, ``.pure``, ``.io``, ``.reporting``), never from a module behind them, so
that what the core offers them is the faces' ``__all__`` and nothing else."""

import ast
import importlib
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FACES = ("i6_shard.core", "i6_shard.core.pure", "i6_shard.core.io", "i6_shard.core.reporting")
UPPER = ("jobs", "returnn_config", "returnn_ext", "cli.py", "__main__.py")


def _upper_modules():
    for entry in UPPER:
        path = os.path.join(ROOT, "i6_shard", entry)
        if entry.endswith(".py"):
            yield path
            continue
        for folder, _, names in os.walk(path):
            yield from (os.path.join(folder, n) for n in sorted(names) if n.endswith(".py"))


def _absolute(path, node):
    """The module an ImportFrom names, made absolute."""
    if not node.level:
        return node.module or ""
    package = os.path.relpath(path, ROOT)[: -len(".py")].split(os.sep)[:-1]  # a module's or __init__'s package
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _is_module(name):
    return os.path.isfile(os.path.join(ROOT, *name.split(".")) + ".py") or os.path.isdir(
        os.path.join(ROOT, *name.split("."))
    )


def imports_past_the_faces():
    """``[(file, line, what)]`` of every import of a core module that is not a face, including a module imported
    by name from a face (``from i6_shard.core.reporting import train_report``)."""
    out = []
    for path in _upper_modules():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        rel = os.path.relpath(path, ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [(rel, node.lineno, a.name) for a in node.names if _past(a.name)]
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(path, node)
                if _past(module):
                    out.append((rel, node.lineno, module))
                elif module in FACES:
                    out += [
                        (rel, node.lineno, f"{module}.{a.name}")
                        for a in node.names
                        if _is_module(f"{module}.{a.name}") and f"{module}.{a.name}" not in FACES
                    ]
    return out


def _past(module):
    return module.startswith("i6_shard.core.") and module not in FACES


def test_the_check_sees_relative_and_absolute_imports():
    assert _past("i6_shard.core.pure.args") and not _past("i6_shard.core.pure") and not _past("i6_shard.cores")
    node = ast.parse("from ..core.pure.args import check_int").body[0]
    assert _absolute(os.path.join(ROOT, "i6_shard", "returnn_config", "dataset.py"), node) == "i6_shard.core.pure.args"
    node = ast.parse("from ...core.io import atomic_write").body[0]
    path = os.path.join(ROOT, "i6_shard", "returnn_config", "reader", "dfd.py")
    assert _absolute(path, node) == "i6_shard.core.io"
    assert _is_module("i6_shard.core.reporting.train_report") and not _is_module("i6_shard.core.reporting.plot_plan")


def test_upper_layers_import_the_core_only_through_its_faces():
    found = imports_past_the_faces()
    assert not found, "imports past the core's faces (import from i6_shard.core, .pure, .io or .reporting):\n" + (
        "\n".join(f"  {f}:{line} {what}" for f, line, what in found)
    )


@pytest.mark.parametrize("face", FACES)
def test_every_name_of_a_face_is_there(face):
    module = importlib.import_module(face)
    assert len(module.__all__) == len(set(module.__all__)), f"{face}.__all__ names one twice"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{face}.__all__ names {missing}, which it does not hold"
