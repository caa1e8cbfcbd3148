"""The layers above the core (``jobs``, ``returnn_config``, ``returnn_ext``, ``cli.py``) import from the core only
through its faces (``i6_shard.core``, ``.pure``, ``.io``, ``.reporting``), never from a module behind them, so
that what the core offers them is the faces' ``__all__`` and nothing else."""

import ast
import importlib
import os
import re

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


#: At most this many names in all ``__all__`` lists of i6_shard together: each layer's face holds what the layers above
#: it use, each module's what leaves its package (docs/architecture.md, "Faces").
MAX_EXPORTED_NAMES = 400


def exported_names():
    """``{module path: [names]}`` of every ``__all__`` assignment in i6_shard, read from the syntax tree; a value that
    is not a literal list or tuple of strings is listed as ``None`` (it cannot be counted)."""
    out = {}
    for folder, _, names in os.walk(os.path.join(ROOT, "i6_shard")):
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in targets
                ):
                    value = node.value
                    literal = isinstance(value, (ast.List, ast.Tuple)) and all(
                        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
                    )
                    out[os.path.relpath(path, ROOT)] = [e.value for e in value.elts] if literal else None
    return out


def test_every_all_is_a_literal_list_of_names():
    computed = [path for path, names in exported_names().items() if names is None]
    assert not computed, f"__all__ that cannot be counted (write them as a list of strings): {computed}"


@pytest.mark.slow
def test_the_all_lists_hold_at_most_400_names():
    lists = exported_names()
    total = sum(len(names or ()) for names in lists.values())
    largest = sorted(((len(n or ()), p) for p, n in lists.items()), reverse=True)[:5]
    assert 0 < total <= MAX_EXPORTED_NAMES, (
        f"{total} names in the __all__ lists of i6_shard (at most {MAX_EXPORTED_NAMES}); the largest: {largest}. "
        "A face lists what the layers above it use, a module what leaves its package; tests import by module path"
    )


def test_the_count_sees_every_kind_of_all(tmp_path, monkeypatch):
    package = tmp_path / "i6_shard"
    package.mkdir()
    (package / "a.py").write_text('__all__ = ["x", "y"]\n')
    (package / "b.py").write_text("__all__: tuple = ('z',)\n")
    (package / "c.py").write_text("_N = {'w': 1}\n__all__ = sorted(_N)\n")
    monkeypatch.setitem(globals(), "ROOT", str(tmp_path))
    assert exported_names() == {
        os.path.join("i6_shard", "a.py"): ["x", "y"],
        os.path.join("i6_shard", "b.py"): ["z"],
        os.path.join("i6_shard", "c.py"): None,
    }


def _face_uses():
    """``{(face, name)}`` the layers above the core use: ``from <face> import name`` (absolute or relative) and
    ``core.name`` / ``core.pure.name`` / ... attribute chains on ``i6_shard.core`` bound to a name."""
    used = set()
    for path in _upper_modules():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        bound = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = _absolute(path, node)
                for a in node.names:
                    if f"{module}.{a.name}" in FACES:
                        bound[a.asname or a.name] = f"{module}.{a.name}"
                    elif module in FACES:
                        used.add((module, a.name))
        for node in ast.walk(tree):
            chain = []
            while isinstance(node, ast.Attribute):
                chain.insert(0, node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in bound and chain:
                face = bound[node.id]
                while chain and f"{face}.{chain[0]}" in FACES:
                    face = f"{face}.{chain.pop(0)}"
                if chain:
                    used.add((face, chain[0]))
    return used


def _docs_uses():
    """``{(face, name)}`` that the docs' Python examples import from a face of the core."""
    used = set()
    for name in ["README.md"] + [os.path.join("docs", n) for n in sorted(os.listdir(os.path.join(ROOT, "docs")))]:
        if name.endswith(".md"):
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                text = f.read()
            for module, names in re.findall(r"^from (i6_shard\.core\S*) import ([\w, ]+)$", text, flags=re.M):
                used.update((module, n.strip()) for n in names.split(","))
    return used


def test_the_faces_hold_only_what_is_used_above_them():
    used = _face_uses() | _docs_uses()
    unused = [f"{face}.{name}" for face in FACES for name in importlib.import_module(face).__all__]
    unused = [n for n in unused if tuple(n.rsplit(".", 1)) not in used]
    assert not unused, (
        "names of the core's faces that no layer above (jobs, returnn_config, returnn_ext, cli) and no example of the "
        f"docs uses: {unused}; drop them from the face (tests import them by module path)"
    )
