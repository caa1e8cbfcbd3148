"""The recipe author's API is listed in one place (docs/architecture.md, "The recipe author's API"), and every
name listed there can be imported from where the table says."""

import ast
import importlib
import os
import re

import pytest

from tests.deps import SISYPHUS_REASON

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _table():
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        doc = f.read()
    section = doc.split("## The recipe author's API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \| `([\w.]+)` \|", section, flags=re.M)


def test_the_api_is_about_fifteen_names():
    rows = _table()
    assert 10 <= len(rows) <= 20, f"the recipe author's API lists {len(rows)} names; keep it near fifteen"
    assert len({name for name, _ in rows}) == len(rows)


@pytest.mark.parametrize("name, module", _table())
def test_each_name_is_importable_from_where_the_doc_says(name, module):
    if module.startswith("i6_shard.jobs"):
        pytest.importorskip("sisyphus", reason=SISYPHUS_REASON)
    if module.startswith("i6_shard.returnn_ext"):
        pytest.importorskip("returnn", reason="the RETURNN-side class needs RETURNN: pip install returnn dm-tree")
    if name in ("sharded_returnn_config", "training_job", "training_job_kwargs"):
        pytest.importorskip("i6_core", reason="the i6_core placement needs i6_core on PYTHONPATH (see development.md)")
    imported = importlib.import_module(module)
    assert name in imported.__all__, f"{module}.__all__ does not list {name}"
    assert getattr(imported, name) is not None


def _i6_shard_imports(source, where):
    """``[(where, name, module)]`` of every import from i6_shard in ``source`` (``import i6_shard...`` as name "*")."""
    out = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "i6_shard":
            out += [(f"{where}:{node.lineno}", a.name, node.module) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(f"{where}:{node.lineno}", "*", a.name) for a in node.names if a.name.split(".")[0] == "i6_shard"]
    return out


def recipe_imports():
    """Every import from i6_shard in the README's Python blocks and in ``recipe_examples/``."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.DOTALL)
    out = [imp for i, block in enumerate(blocks) for imp in _i6_shard_imports(block, f"README.md block {i + 1}")]
    for folder, _, names in os.walk(os.path.join(ROOT, "recipe_examples")):
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                out += _i6_shard_imports(f.read(), os.path.relpath(path, ROOT))
    return out


def test_the_readme_and_the_recipe_examples_import_the_api_from_where_the_table_says():
    imports = recipe_imports()
    assert any(name == "training_job" for _, name, _ in imports)  # the README's recipe is read
    table = set(_table())
    wrong = [f"{where}: {name} from {module}" for where, name, module in imports if (name, module) not in table]
    assert not wrong, "imports that are not the API table's name and path (docs/architecture.md):\n" + "\n".join(wrong)


def test_the_import_check_sees_a_wrong_path_and_a_module():
    found = _i6_shard_imports(
        "from i6_shard.returnn_config.i6core import training_job\nfrom i6_shard import core\nimport i6_shard.jobs", "x"
    )
    assert found == [
        ("x:1", "training_job", "i6_shard.returnn_config.i6core"),
        ("x:2", "core", "i6_shard"),
        ("x:3", "*", "i6_shard.jobs"),
    ]
