"""`plan --lengths`: a plan cut by one archive (a sizes archive in bytes: what a plain DistributeFilesDataset cuts
by) predicts its loss with the sequence lengths of a costs archive of the same files."""

import json
import os

import numpy as np
import pytest

from tests.costs_data import frames_costs
from i6_shard import core
from i6_shard.cli import main
from i6_shard.core.pure.batching import Batching
from i6_shard.core.pure.engine_sim import EngineSettings, simulate_sub_epoch

NUM_SHARDS, PARTITION_EPOCH, NUM_EPOCHS, BATCH_SIZE = 3, 2, 4, 700


def _archives(tmp_path, *, costs_keys=None):
    """A sizes archive in bytes and a frames costs archive of the same 36 files, whose bytes are not proportional
    to their frames (so a cut by bytes gives other bins than a cut by frames)."""
    rng = np.random.RandomState(7)
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(36)]
    num_seqs = rng.randint(1, 9, size=len(keys))
    lengths = [rng.randint(20, 400, size=n).astype(np.int32) for n in num_seqs]
    sizes_path, costs_path = str(tmp_path / "sizes.npz"), str(tmp_path / "costs.npz")
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=rng.randint(10**5, 10**7, size=len(keys))), sizes_path)
    costs = frames_costs(keys if costs_keys is None else costs_keys, lengths)
    core.io.save_file_costs(costs, costs_path)
    return sizes_path, costs_path, lengths


def _plan(sizes_path, out, *extra):
    argv = ["plan", "--sizes", sizes_path, "--num-shards", str(NUM_SHARDS), "--partition-epoch", str(PARTITION_EPOCH)]
    argv += ["--num-epochs", str(NUM_EPOCHS), "--distribution", "returnn", "--no-plot", *extra, "-o", str(out)]
    return main(argv)


def test_a_byte_cut_plan_predicts_what_its_bins_give_with_the_costs_lengths(tmp_path, capsys):
    sizes_path, costs_path, lengths = _archives(tmp_path)
    assert _plan(sizes_path, tmp_path / "plain") == 0
    assert _plan(sizes_path, tmp_path / "pred", "--lengths", costs_path, "--batch-size", str(BATCH_SIZE)) == 0
    capsys.readouterr()
    # The bins are RETURNN's cut by bytes, as without --lengths: the same plan file, array for array; the predicted
    # one also records the engine settings it was simulated with.
    with np.load(tmp_path / "plain" / "plan.npz") as a, np.load(tmp_path / "pred" / "plan.npz") as b:
        assert set(b.files) - set(a.files) == {"engine_settings"}
        assert all(np.array_equal(a[name], b[name]) for name in a.files)
        assert json.loads(str(b["engine_settings"]))["batch_size"] == BATCH_SIZE
    summary = json.load(open(tmp_path / "pred" / "summary.json"))
    assert summary["unit"] == "bytes" and summary["lengths_from"] == "costs.npz"
    assert "lengths_from" not in json.load(open(tmp_path / "plain" / "summary.json"))
    # The same bins, read from the plan file, each rank's sequences simulated directly in the engine model.
    with np.load(tmp_path / "pred" / "plan.npz") as npz:
        orders, bounds = npz["orders"], npz["bounds"]
    engine = EngineSettings(seq_ordering="random", batch_size=BATCH_SIZE)
    want_steps, want_dropped = [], []
    for epoch_0idx in range(NUM_EPOCHS):
        k, s = divmod(epoch_0idx, PARTITION_EPOCH)
        per_rank = []
        for r in range(NUM_SHARDS):
            b = r * PARTITION_EPOCH + s  # sharded: rank r reads bin r * partition_epoch + sub-epoch
            files = orders[k, 0][bounds[k, 0][b] : bounds[k, 0][b + 1]]
            per_rank.append(np.concatenate([lengths[i] for i in files]).astype(np.int64))
        sim = simulate_sub_epoch(per_rank, engine=engine, full_epoch_0idx=k, random_seed_offset=0)
        want_steps.append(sim.steps_exact)
        want_dropped.append(sim.dropped_fraction)
    assert summary["steps_exact"] == want_steps
    assert summary["batching"]["per_sub_epoch"]["dropped_fraction"] == pytest.approx(want_dropped, abs=1e-6)
    assert summary["dropped_fraction_predicted"] == pytest.approx(float(np.mean(want_dropped)), abs=1e-6)
    assert summary["dropped_fraction_predicted"] > 0  # the case checks something
    assert "from costs.npz" in open(tmp_path / "pred" / "report.txt").read()


def test_a_lengths_archive_of_other_files_is_refused_naming_both_and_the_first_differing_key(tmp_path, capsys):
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(36)]
    keys[5] = "/corpus/other.hdf"
    sizes_path, costs_path, _ = _archives(tmp_path, costs_keys=keys)
    out = tmp_path / "out"
    assert _plan(sizes_path, out, "--lengths", costs_path, "--batch-size", str(BATCH_SIZE)) == 2
    err = capsys.readouterr().err
    assert sizes_path in err and costs_path in err
    assert "entry 5 ('/corpus/part-005.hdf'" in err and "'/corpus/other.hdf' in" in err
    assert not os.path.exists(out)
    request = core.PlanRequest.from_options(
        num_shards=NUM_SHARDS,
        partition_epoch=PARTITION_EPOCH,
        num_epochs=NUM_EPOCHS,
        batch_size=BATCH_SIZE,
        lengths=costs_path,
    )
    with pytest.raises(ValueError, match=r"first differ at entry 5 \('/corpus/part-005.hdf' in"):
        core.plan_archive(sizes_path, request)


def test_a_sizes_archive_as_the_lengths_is_refused(tmp_path, capsys):
    sizes_path, _, _ = _archives(tmp_path)
    other = str(tmp_path / "other_sizes.npz")
    os.link(sizes_path, other)
    assert _plan(sizes_path, tmp_path / "out", "--lengths", other, "--batch-size", str(BATCH_SIZE)) == 2
    assert "holds sizes in bytes, without sequence lengths" in capsys.readouterr().err


def test_lengths_without_batching_limits_are_refused_by_name(tmp_path, capsys):
    sizes_path, costs_path, _ = _archives(tmp_path)
    assert _plan(sizes_path, tmp_path / "out", "--lengths", costs_path) == 2
    assert f"lengths={costs_path!r} gives the predicted loss its sequence lengths" in capsys.readouterr().err
    request = core.PlanRequest.from_options(
        num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, num_epochs=NUM_EPOCHS, lengths=costs_path
    )
    with pytest.raises(ValueError, match="which make_plan_outputs does not read"):  # never ignored silently
        core.make_plan_outputs(core.load_file_sizes(sizes_path), request)


def test_lengths_of_other_files_given_to_a_made_plan_name_the_first_differing_key(tmp_path):
    from i6_shard.core import planning

    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(36)]
    keys[7] = "/corpus/other.hdf"
    sizes_path, costs_path, _ = _archives(tmp_path, costs_keys=keys)
    request = core.PlanRequest.from_options(
        num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, num_epochs=NUM_EPOCHS
    )
    plan = planning.make_plan(core.load_file_sizes(sizes_path), request)
    with pytest.raises(ValueError, match=r"entry 7 is '/corpus/other.hdf', not the plan's '/corpus/part-007.hdf'"):
        planning.plan_outputs(
            plan, batching=Batching(batch_size=BATCH_SIZE, max_seqs=None), lengths=core.io.load_file_costs(costs_path)
        )
