"""The core stays pure: importing it pulls in neither Sisyphus, RETURNN nor i6_core, and its pure
part imports neither the I/O nor the reporting part, nor anything that touches files or processes."""

import ast
import os
import subprocess
import sys

import pytest

CORE = os.path.join(os.path.dirname(__file__), "..", "..", "i6_shard", "core")
#: Standard modules that do I/O, spawn or print; the pure part needs none of them.
IMPURE_STDLIB = {
    "os",
    "sys",
    "io",
    "subprocess",
    "threading",
    "concurrent",
    "multiprocessing",
    "shutil",
    "tempfile",
    "zipfile",
    "pathlib",
    "socket",
    "time",
    "logging",
    "builtins",
}


def _imports(path):
    """(module, level) of every import statement in a file, nested ones included."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, 0
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level


def _calls(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    return {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


def _modules(layer):
    folder = os.path.join(CORE, layer)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py"))


def test_core_imports_no_framework():
    code = (
        "import sys, i6_shard.core\n"
        "bad = [m for m in ('sisyphus', 'returnn', 'i6_core', 'tree') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"i6_shard.core imported {out}"


@pytest.mark.parametrize("path", _modules("pure"), ids=os.path.basename)
def test_pure_part_imports_no_io_and_calls_no_print_or_open(path):
    for module, level in _imports(path):
        top = module.split(".")[0]
        if level == 0:
            assert top not in IMPURE_STDLIB, f"{path} imports {module}, which does I/O"
            assert top not in ("i6_shard", "sisyphus", "returnn", "i6_core"), f"{path} imports {module}"
        else:
            assert level == 1, f"{path} imports from outside core/pure ({'.' * level}{module})"
    assert not _calls(path) & {"print", "open", "input", "exec", "eval"}, f"{path} prints or opens files"


@pytest.mark.parametrize("path", _modules("io"), ids=os.path.basename)
def test_io_part_does_not_import_reporting(path):
    for module, level in _imports(path):
        assert not (level == 2 and module.startswith("reporting")), f"{path} imports {module}"
        assert not module.startswith("i6_shard.core.reporting"), f"{path} imports {module}"


def test_the_check_above_would_catch_an_impure_module(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ..io.atomic import atomic_write\nimport os\nprint(os.getcwd())\n")
    assert ("io.atomic", 2) in set(_imports(str(bad))) and ("os", 0) in set(_imports(str(bad)))
    assert "print" in _calls(str(bad))
