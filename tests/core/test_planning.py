"""The planning floor: one meaning of num_epochs for every entry point, a sizes archive refused by name where a
job or a builder takes one, and the per-(sub-epoch, rank) outputs computed in one function that every output
shows."""

import json

import numpy as np
import pytest

from tests.costs_data import frames_costs
from i6_shard import core
from i6_shard.core import planning
from i6_shard.core.pure.request import PlanRequest


def _dfd(**extra):
    from i6_shard.returnn_config.sub_epoch import bind_sub_epoch_dataset

    return {
        "class": "DistributeFilesDataset",
        "files": [f"/data/f{i}.hdf" for i in range(8)],
        "partition_epoch": 2,
        "seq_ordering": "random",
        "distrib_shard_files": True,
        "get_sub_epoch_dataset": bind_sub_epoch_dataset({"class": "HDFDataset"}),
        **extra,
    }


def test_num_epochs_is_the_trainings_for_every_entry_point():
    """The command line, ShardPlanJob, the config reader and plan_for_returnn_config all take the training's
    num_epochs and plan the sub-epochs the dataset preloads after them (RETURNN's default 1, or the dataset's)."""
    from i6_shard.returnn_config import plan_for_returnn_config
    from i6_shard.returnn_config.reader import find_distribute_files_datasets

    request = PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=4)
    assert (request.settings.num_epochs, request.settings.training_num_epochs) == (5, 4)
    (info,) = find_distribute_files_datasets({"torch_distributed": {}, "train": _dfd()}, num_ranks=2)
    assert info.plan_request(num_epochs=4).settings == request.settings.replace(random_seed_offset=0)
    sizes = core.FileSizes(keys=[f"/data/f{i}.hdf" for i in range(8)], sizes=list(range(1, 9)))
    plan = plan_for_returnn_config(
        {"torch_distributed": {}, "train": _dfd()}, file_sizes=sizes, num_ranks=2, num_epochs=4
    )
    assert (plan.settings.num_epochs, plan.settings.preloaded_sub_epochs) == (5, 1)
    plan = plan_for_returnn_config(
        {"torch_distributed": {}, "train": _dfd(preload_next_n_sub_epochs=0)},
        file_sizes=sizes,
        num_ranks=2,
        num_epochs=4,
    )
    assert (plan.settings.num_epochs, plan.settings.preloaded_sub_epochs) == (4, 0)


def test_a_file_list_given_as_the_sizes_archive_is_refused_by_name():
    """The builder and plan_for_returnn_config refuse what the job refuses, with the same words: the value, and to
    run sizes or costs first."""
    from i6_shard.returnn_config import plan_for_returnn_config, sharded_files_dataset

    files = [f"/data/f{i}.hdf" for i in range(8)]
    words = r"file_sizes='/data/files.txt' is not a \.npz file: .* run `sizes` or `costs` on the file list first"
    with pytest.raises(ValueError, match=words):
        sharded_files_dataset(
            files, sub_epoch_dataset={"class": "HDFDataset"}, partition_epoch=2, file_sizes="/data/files.txt"
        )
    with pytest.raises(ValueError, match=words):
        plan_for_returnn_config(
            {"torch_distributed": {}, "train": _dfd()}, file_sizes="/data/files.txt", num_ranks=2, num_epochs=4
        )


def _costs_archive(path, num_files=24, seed=1):
    rng = np.random.RandomState(seed)
    num_seqs = rng.randint(1, 6, size=num_files)
    lengths = [rng.randint(10, 200, size=n).astype(np.int32) for n in num_seqs]
    keys = [f"/data/f{i:02d}.hdf" for i in range(num_files)]
    costs = frames_costs(keys, lengths)
    core.io.save_file_costs(costs, path)
    return path


def test_every_output_shows_what_rank_outputs_computes(tmp_path, monkeypatch):
    """rank_outputs is the one function of the per-(sub-epoch, rank) outputs (where an exact simulation plugs
    in): what it returns is what the summary holds."""
    archive = _costs_archive(str(tmp_path / "costs.npz"))
    request = PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=3, batch_size=400)
    real = planning.rank_outputs

    def simulated(plan, **kwargs):
        out = real(plan, **kwargs)
        exact = dict(out.prediction, steps_mean=np.full_like(out.prediction["steps_mean"], 7.0))
        exact["dropped"] = np.zeros_like(out.prediction["dropped"])
        return planning.RankOutputs(out.stats, exact, out.batching, out.sync, out.per_file_lengths)

    before = planning.plan_archive(archive, request)
    monkeypatch.setattr(planning, "rank_outputs", simulated)
    after = planning.plan_archive(archive, request)
    paths = {n: str(tmp_path / f"{n}.{e}") for n, e in (("plan", "npz"), ("summary", "json"), ("report", "txt"))}
    summary = core.write_outputs(
        after, plan_path=paths["plan"], summary_path=paths["summary"], report_path=paths["report"]
    )
    assert before.ranks.prediction["steps_mean"].shape == (3, 2)
    assert summary["batching"]["per_sub_epoch"]["steps"] == [[7.0, 7.0]] * 3
    assert json.load(open(paths["summary"]))["dropped_fraction_predicted"] == 0.0
    assert np.array_equal(after.arrays["orders"], before.arrays["orders"])  # the plan itself is the floor's


def test_the_memory_check_is_made_once_at_the_entry(tmp_path, monkeypatch):
    archive = _costs_archive(str(tmp_path / "costs.npz"))
    calls = []
    real = planning.check_plan_fits_memory
    monkeypatch.setattr(planning, "check_plan_fits_memory", lambda *a, **k: calls.append(1) or real(*a, **k))
    request = PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=3)
    planning.plan_archive(archive, request)
    assert len(calls) == 1
