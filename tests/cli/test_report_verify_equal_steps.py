"""``report --verify`` of a distribution "equal_steps" plan: its bins are cut with the files' sequence lengths, which
the plan file does not hold, so it verifies with the costs archive the plan was made from (``--lengths``) and the
engine settings the plan file records; an edited bin, another engine or other lengths are caught."""

import os

import numpy as np
import pytest

from tests.costs_data import frames_costs
from i6_shard import core
from i6_shard.cli import main
from i6_shard.core.io.plan_file import save_plan_arrays

NUM_SHARDS, PARTITION_EPOCH = 3, 2
TORCH_DISTRIBUTED = {"reduce_type": "param", "param_sync_step": 3}


def _costs(path, seed):
    rng = np.random.RandomState(seed)
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(30)]
    lengths = [rng.randint(5, 90, size=n).astype(np.int32) for n in rng.randint(1, 12, size=len(keys))]
    core.io.save_file_costs(frames_costs(keys, lengths), path)


@pytest.fixture()
def equal_plan(tmp_path):
    costs_path, out = str(tmp_path / "costs.npz"), tmp_path / "plan"
    _costs(costs_path, seed=11)
    argv = ["plan", "--sizes", costs_path, "--num-shards", str(NUM_SHARDS), "--partition-epoch", str(PARTITION_EPOCH)]
    argv += ["--num-epochs", "5", "--distribution", "equal_steps", "--batch-size", "200", "--max-seqs", "4"]
    argv += ["--accum-grad-multiple-step", "2", "--torch-distributed", repr(TORCH_DISTRIBUTED), "--no-plot"]
    assert main([*argv, "-o", str(out)]) == 0
    return str(out), costs_path


def test_an_equal_steps_plan_verifies_with_its_costs_archive(equal_plan, capsys):
    out, costs_path = equal_plan
    capsys.readouterr()
    assert main(["report", out, "--verify", "--lengths", costs_path]) == 0
    assert "verified: every stored full epoch equals" in capsys.readouterr().out


def test_without_the_costs_archive_verify_says_what_to_give(equal_plan, capsys):
    out, _ = equal_plan
    capsys.readouterr()
    assert main(["report", out, "--verify"]) == 2
    err = capsys.readouterr().err
    assert "distribution='equal_steps' plan" in err and "--lengths costs.npz" in err
    assert main(["report", out]) == 0  # the report itself reads the stored bins


def _edited(out, tmp_path, edit):
    path = os.path.join(out, core.PLAN_FILE)
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    edit(arrays)
    edited = str(tmp_path / "edited.npz")
    save_plan_arrays(arrays, edited)
    return edited


def _swap_two_files_between_ranks(arrays):
    order, bounds = arrays["orders"][1, 0], arrays["bounds"][1, 0]
    a, b = bounds[0], bounds[PARTITION_EPOCH]  # the first file of rank 0's and of rank 1's first bin
    order[[a, b]] = order[[b, a]]


def _other_engine(arrays):
    arrays["engine_settings"] = np.array(str(arrays["engine_settings"]).replace('"max_seqs": 4', '"max_seqs": 1'))


@pytest.mark.parametrize("edit", [_swap_two_files_between_ranks, _other_engine])
def test_an_edited_equal_steps_plan_fails_verification(equal_plan, tmp_path, capsys, edit):
    out, costs_path = equal_plan
    edited = _edited(out, tmp_path, edit)
    capsys.readouterr()
    assert main(["report", edited, "--verify", "--lengths", costs_path]) == 2
    assert "differs from what this i6_shard computes" in capsys.readouterr().err


def test_lengths_of_other_sequences_fail_and_of_other_files_are_refused(equal_plan, tmp_path, capsys):
    out, _ = equal_plan
    other = str(tmp_path / "other.npz")
    _costs(other, seed=12)  # the same keys, other sequence lengths
    capsys.readouterr()
    assert main(["report", out, "--verify", "--lengths", other]) == 2
    assert "differs from what this i6_shard computes" in capsys.readouterr().err
    keys = [f"/corpus/x-{i:03d}.hdf" for i in range(30)]
    core.io.save_file_costs(frames_costs(keys, [np.array([5], dtype=np.int32)] * 30), other)
    assert main(["report", out, "--verify", "--lengths", other]) == 2
    assert "/corpus/x-000.hdf" in capsys.readouterr().err


def test_lengths_are_refused_where_they_are_not_used(equal_plan, tmp_path, capsys):
    out, costs_path = equal_plan
    assert main(["report", out, "--lengths", costs_path]) == 2
    assert "verify is off" in capsys.readouterr().err
