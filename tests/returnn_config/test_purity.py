"""Building a plain dataset dict and its config code needs neither Sisyphus, i6_core nor RETURNN."""

import subprocess
import sys

from tests.blocking import run_to_end


def test_builders_import_no_framework():
    code = (
        "import sys\n"
        "from i6_shard.returnn_config import sharded_files_dataset\n"
        "from i6_shard.returnn_config.pycode import config_code\n"
        "d = sharded_files_dataset(['a.hdf', 'b.hdf'], sub_epoch_dataset={'class': 'HDFDataset', "
        "'seq_ordering': 'random'}, partition_epoch=2, num_shards=1)\n"
        "config_code({'train': d})\n"
        "print(','.join(m for m in ('sisyphus', 'i6_core', 'returnn', 'tree') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"building a plain dataset dict imported {out}"


#: Run first in the child: every import of RETURNN fails, as in a Sisyphus manager's Python without it.
_BLOCK_RETURNN = """
import sys
class _NoReturnn:
    def find_spec(self, name, path=None, target=None):
        if name == "returnn" or name.startswith("returnn."):
            raise ImportError(f"No module named {name!r} (blocked: the manager's Python has no RETURNN)")
        return None
sys.meta_path.insert(0, _NoReturnn())
"""


def test_the_readme_recipe_graph_builds_without_returnn(tmp_path):
    """The README recipe's graph (equal_steps, with plan=) is built in a Python where ``import returnn`` fails,
    with the real Sisyphus and i6_core; RETURNN is never imported."""
    import os
    import pytest

    pytest.importorskip(
        "sisyphus.job",
        reason="needs the real Sisyphus: pip install it from its source repository "
        "(github.com/rwth-i6/sisyphus); the PyPI package 'sisyphus' is unrelated",
    )
    pytest.importorskip(
        "i6_core.returnn",
        reason="needs i6_core: clone github.com/rwth-i6/i6_core into recipe/ or put its parent directory on PYTHONPATH",
    )
    readme = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
    code = (
        _BLOCK_RETURNN
        + f"""
import re
readme = open({readme!r}, encoding="utf-8").read()
section = readme[readme.index("## Config builders"):]
snippet = re.search(r"```python\\n(.*?)```", section, re.DOTALL).group(1)
namespace = {{"__name__": "readme_config"}}
exec(compile(snippet, "README.md", "exec"), namespace)
jobs = []
make_job = namespace["training_job"]
namespace["training_job"] = lambda *a, **k: jobs.append(make_job(*a, **k)) or jobs[-1]
namespace["py"]()
assert len(jobs) == 1, jobs
jobs[0]._sis_id()  # hashed as the manager hashes it
print("returnn imported:", sorted(m for m in sys.modules if m == "returnn" or m.startswith("returnn.")))
"""
    )
    env = dict(os.environ, SIS_GLOBAL_SETTINGS_FILE=str(tmp_path / "settings.py"))  # no settings file there
    proc = run_to_end([sys.executable, "-c", code], cwd=str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "returnn imported: []" in proc.stdout
