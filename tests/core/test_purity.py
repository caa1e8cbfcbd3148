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


def _targets(path, root=os.path.join(CORE, "..", "..")):
    """The absolute modules a file imports, names imported from a package included
    (``from .. import planning`` in core/io/x.py imports ``i6_shard.core.planning``)."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    package = rel[: -len(".py")].replace(os.sep, ".").rsplit(".", 1)[0]
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _floor_modules():
    single = os.path.join(CORE, "planning.py")
    return [single] if os.path.exists(single) else _modules("planning")


#: Which layer of the core may not import which: pure imports none of the others, io neither the planning floor
#: nor reporting, the floor not reporting.
_FORBIDDEN = {
    "pure": ("i6_shard.core.io", "i6_shard.core.planning", "i6_shard.core.reporting"),
    "io": ("i6_shard.core.planning", "i6_shard.core.reporting"),
    "planning": ("i6_shard.core.reporting",),
}


@pytest.mark.parametrize(
    "layer, path",
    [(layer, p) for layer in ("pure", "io") for p in _modules(layer)] + [("planning", p) for p in _floor_modules()],
    ids=lambda v: os.path.basename(v) if os.sep in str(v) else v,
)
def test_each_layer_imports_only_the_layers_below_it(layer, path):
    bad = [t for t in _targets(path) for f in _FORBIDDEN[layer] if t == f or t.startswith(f + ".")]
    assert not bad, f"{path} ({layer}) imports {sorted(set(bad))}"


def test_the_layer_check_resolves_relative_imports(tmp_path):
    """The check above sees ``from .. import planning`` and ``from ..reporting.x import y`` in core/io."""
    bad = tmp_path / "i6_shard" / "core" / "io" / "probe.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("from .. import planning\nfrom ..reporting.outputs import summary_of\nfrom .npz import save_npz\n")
    targets = set(_targets(str(bad), root=str(tmp_path)))
    assert {"i6_shard.core.planning", "i6_shard.core.reporting.outputs", "i6_shard.core.io.npz"} <= targets


#: What makes a plan or its outputs: called in the planning floor (and below), never in reporting.
_MAKING = set(
    "ShardPlan PlanSettings compute_plan_stats plan_bins plan_arrays plan_file_arrays with_settings predict_plan_drop "
    "compute_cache_footprint partition_epoch_fits check_plan_fits_memory layout".split()
)


def _called_names(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            yield func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


@pytest.mark.parametrize("path", _modules("reporting"), ids=os.path.basename)
def test_reporting_only_renders_what_the_floor_returns(path):
    made = sorted(set(_called_names(path)) & _MAKING)
    assert not made, f"{path} makes a plan or its outputs ({made}); do that in core/planning.py"


@pytest.mark.parametrize("path", _modules("io"), ids=os.path.basename)
def test_io_only_saves_and_loads_the_bins(path):
    """The bins are cut on the planning floor (``plan_bins``); io writes and reads the arrays it is given."""
    cut = sorted(set(_called_names(path)) & {"layout", "cut_full_epoch", "plan_bins", "shuffle_order"})
    assert not cut, f"{path} cuts bins ({cut}); cut them in core/planning.py and pass them in"
