"""The recipe author's API is listed in one place (docs/architecture.md, "The recipe author's API"), and every
name listed there can be imported from where the table says."""

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
