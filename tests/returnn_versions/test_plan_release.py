"""A plan of ``distribution="returnn"`` for a given RETURNN release (``--returnn-version``, ``returnn_version=``)
holds that release's own bins: compared with its ``_distribute_evenly_by_size`` run in a subprocess with the
release first on the path, on an input where that release cuts otherwise than the newest."""

import json
import os
import sys

import numpy as np
import pytest

from i6_shard import core
from i6_shard.cli import main
from i6_shard.core.pure.returnn_features import returnn_version_key

from tests.blocking import run_to_end
from .releases import NEWEST, OLD_RELEASES, install

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OLDEST = OLD_RELEASES[0]  # 1.20240620.64807, before the cut re-averaged the rest (1.20240705.144031)
#: 12 files in 2 ranks x 2 sub-epochs (the list's order, seq_ordering default): the oldest release cuts
#: [0, 4, 6, 8, 12], the newest [0, 4, 6, 7, 12]
SIZES = [16, 1, 4, 4, 8, 10, 19, 5, 7, 13, 2, 7]
_SCRIPT = """
import json, sys
import returnn
from returnn.datasets.distrib_files import DistributeFilesDataset
keys, sizes, num_bins = json.loads(sys.argv[1])
bins = DistributeFilesDataset._distribute_evenly_by_size(
    num_bins=num_bins, file_sizes=dict(zip(keys, sizes)), files_order=keys
)
print(json.dumps({"version": returnn.__version__, "bins": bins}))
"""


def release_bins(version, keys, sizes, *, num_bins):
    """The bins RETURNN ``version``'s own ``_distribute_evenly_by_size`` cuts for the files in the given order."""
    env = {**os.environ, "PYTHONPATH": install(version)}
    arg = json.dumps([list(keys), [int(s) for s in sizes], num_bins])
    proc = run_to_end([sys.executable, "-c", _SCRIPT, arg], env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert returnn_version_key(out["version"]) == returnn_version_key(version), (
        f"the subprocess imported RETURNN {out['version']}, not {version}"
    )
    return out["bins"]


def _plan(tmp_path, name, *extra, sizes=SIZES):
    keys = [f"/corpus/f{i:02d}.hdf" for i in range(len(sizes))]
    sizes_path = str(tmp_path / f"sizes-{name}.npz")
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=np.array(sizes, dtype=np.int64)), sizes_path)
    out = str(tmp_path / name)
    argv = ["plan", "--sizes", sizes_path, "--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "4"]
    argv += ["--distribution", "returnn", "--seq-ordering", "default", "--no-plot", "-o", out, *extra]
    assert main(argv) == 0
    return keys, out


def _stored_bins(out):
    plan_file = core.read_plan_file(os.path.join(out, "plan.npz"), verify=True)
    keys = plan_file.plan.keys
    bins = []
    for k in range(plan_file.orders.shape[0]):
        order, bounds = plan_file.layout(k)
        bins.append([[keys[i] for i in order[bounds[b] : bounds[b + 1]]] for b in range(len(bounds) - 1)])
    return plan_file, bins


@pytest.mark.slow
def test_a_plan_for_an_old_release_holds_that_releases_own_bins(tmp_path, capsys):
    keys, old_out = _plan(tmp_path, "old", "--returnn-version", OLDEST)
    _, new_out = _plan(tmp_path, "new")
    old_file, old_bins = _stored_bins(old_out)
    new_file, new_bins = _stored_bins(new_out)
    theirs_old = release_bins(OLDEST, keys, SIZES, num_bins=4)
    theirs_new = release_bins(NEWEST, keys, SIZES, num_bins=4)
    assert theirs_old != theirs_new, "the input no longer shows the two releases' cuts apart"
    assert len(old_bins) == 3  # 4 sub-epochs and the preloaded one; the list's order every full epoch
    assert old_bins == [theirs_old] * 3 and new_bins == [theirs_new] * 3
    # the plan file records the release (a plan made without it: none, read as the newest's)
    assert old_file.plan.returnn_version == OLDEST and new_file.plan.returnn_version is None
    assert core.load_plan(os.path.join(old_out, "plan.npz")).returnn_version == OLDEST
    with np.load(os.path.join(new_out, "plan.npz")) as data:
        assert "returnn_version" not in data.files
    with open(os.path.join(old_out, "summary.json")) as f:
        assert json.load(f)["settings"]["returnn_version"] == OLDEST
    with open(os.path.join(new_out, "summary.json")) as f:
        assert "returnn_version" not in json.load(f)["settings"]
    with open(os.path.join(old_out, "report.txt")) as f:
        assert f"RETURNN release      {OLDEST} (its own cut)" in f.read()


def test_each_ranks_files_of_the_old_releases_plan_are_its_bins(tmp_path, capsys):
    keys, out = _plan(tmp_path, "old", "--returnn-version", OLDEST)
    theirs = release_bins(OLDEST, keys, SIZES, num_bins=4)
    capsys.readouterr()
    for rank in range(2):
        for epoch in (1, 2, 3):
            assert main(["files", out, "--rank", str(rank), "--epoch", str(epoch), "--json"]) == 0
            files = json.loads(capsys.readouterr().out)["keys"]
            assert files == theirs[rank * 2 + (epoch - 1) % 2], (rank, epoch)


@pytest.mark.parametrize(
    "value, error, message",
    [
        ("1.2024", ValueError, "'1.2024' is not of the form 1.YYYYMMDD.HHMMSS"),
        ("1.20240101.0", ValueError, "older than 1.20240620.64807"),
        (20240620, TypeError, "has type int"),
    ],
)
def test_a_returnn_version_that_is_none_is_refused_naming_it(value, error, message):
    with pytest.raises(error, match="returnn_version") as info:
        core.PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=4, returnn_version=value)
    assert message in str(info.value)


_START = """
import json, sys
import returnn
from i6_shard.returnn_ext import ShardedDistributeFilesDataset
from tests.returnn_ranks import as_rank, placeholder_sub_epoch_dataset
out = {}
for name, (keys, plan) in json.loads(sys.argv[1]).items():
    with as_rank(0, 2):
        dataset = ShardedDistributeFilesDataset(
            files=keys, get_sub_epoch_dataset=placeholder_sub_epoch_dataset, partition_epoch=2,
            seq_ordering="default", distrib_shard_files=True, plan=plan,
        )
        try:
            dataset._lazy_init_file_sizes()  # checks the plan against the dataset and this RETURNN
            out[name] = "taken"
        except ValueError as exc:
            out[name] = str(exc)
print(json.dumps({"version": returnn.__version__, "started": out}))
"""


def test_a_plan_made_without_a_release_is_taken_on_the_oldest_where_its_bins_are_that_releases(tmp_path):
    """A ``distribution="returnn"`` plan made without ``returnn_version`` (cut as the newest cuts) on the oldest
    release: taken where the oldest's own cut gives the same bins for its files, refused naming the fix where not."""
    plans = {
        "differ": _plan(tmp_path, "differ"),
        "same": _plan(tmp_path, "same", sizes=[4] * len(SIZES)),
    }
    keys = plans["same"][0]
    assert release_bins(OLDEST, keys, [4] * len(SIZES), num_bins=4) == release_bins(
        NEWEST, keys, [4] * len(SIZES), num_bins=4
    ), "the equal sizes no longer show a plan both releases cut alike"
    arg = json.dumps({name: [keys, os.path.join(out, "plan.npz")] for name, (keys, out) in plans.items()})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([install(OLDEST), _REPO])}
    proc = run_to_end([sys.executable, "-c", _START, arg], env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert returnn_version_key(out["version"]) == returnn_version_key(OLDEST)
    assert out["started"]["same"] == "taken"
    refusal = out["started"]["differ"]
    assert "as the newest RETURNN (no returnn_version given) cuts" in refusal, refusal
    assert f"returnn_version={out['version']!r}" in refusal and "1.20240705.144031" in refusal, refusal
