"""ShardedDistributeFilesDataset with ``plan=``, each rank as RETURNN builds it in a torch_distributed
training (tests/returnn_ranks.py): every rank reads exactly the plan's bins (read here from the plan
file with numpy alone), stats no file and cuts no bins; a plan that does not fit fails at start-up
with a message naming the difference; an old plan keeps its bins after the algorithm changes."""

import dataclasses
import importlib.util
import os
from typing import Any, List, Sequence

import numpy as np
import pytest

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from returnn.datasets.basic import init_dataset  # noqa: E402

from i6_shard.core import PlanSettings, ShardPlan, save_plan  # noqa: E402
from i6_shard.core.pure import cut as cut_module  # noqa: E402
from i6_shard.returnn_ext import ShardedDistributeFilesDataset  # noqa: E402

from ..returnn_ranks import _sized_files, as_rank, dfd_files_per_epoch, placeholder_sub_epoch_dataset, returnn_files  # noqa: E402

_PLANS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "plans")


def _plan_bins(path: str, *, num_epochs: int) -> List[List[List[str]]]:
    """[rank][epoch - 1] -> keys, from the plan file's arrays with numpy alone (docs/file_formats.md)."""
    with np.load(path, allow_pickle=False) as d:
        keys = bytes(d["keys_utf8"]).decode("utf-8", "surrogatepass").split("\0")
        p, w, sharded = int(d["partition_epoch"]), int(d["num_shards"]), bool(d["distrib_shard_files"])
        orders, bounds = d["orders"], d["bounds"]
    out = []
    for r in range(w):
        per_epoch = []
        for epoch in range(1, num_epochs + 1):
            k, layout = (epoch - 1) // p, 0 if sharded else r
            b = (r * p if sharded else 0) + (epoch - 1) % p
            per_epoch.append([keys[i] for i in orders[k, layout, bounds[k, layout, b] : bounds[k, layout, b + 1]]])
        out.append(per_epoch)
    return out


def _dataset(files: Sequence[Any], plan: str, settings: PlanSettings, **opts):
    d = {
        "class": ShardedDistributeFilesDataset,
        "files": list(files),
        "get_sub_epoch_dataset": placeholder_sub_epoch_dataset,
        "use_worker_proc": False,
        "plan": plan,
        "partition_epoch": settings.partition_epoch,
        "seq_ordering": settings.seq_ordering,
        "distrib_shard_files": settings.distrib_shard_files,
    }
    if settings.distrib_shard_files:
        d["sharding_fix"] = True
    if settings.same_seed_on_all_ranks:
        d["random_seed_offset"] = settings.random_seed_offset
    d.update(opts)
    return init_dataset(d)


def _no_stat(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError(f"a file was statted: {args}")

    monkeypatch.setattr(os.path, "getsize", fail)


def _ranks_read(files, plan_path, settings, *, num_epochs: int, monkeypatch, **opts) -> List[List[List[str]]]:
    got = []
    for rank in range(settings.num_shards):
        with as_rank(rank, settings.num_shards, dataset_random_seed_offset=settings.random_seed_offset):
            with monkeypatch.context() as m:
                _no_stat(m)
                dataset = _dataset(files, plan_path, settings, **opts)
                got.append(dfd_files_per_epoch(dataset, num_epochs=num_epochs))
    return got


@pytest.mark.parametrize("distribution", ["returnn", "balanced", "flexible", "flexible_auto"])
@pytest.mark.parametrize("sharding", ["sharded", "unsharded", "unsharded_same_seed"])
def test_every_rank_reads_exactly_the_plans_bins(tmp_path, monkeypatch, distribution, sharding):
    rng = np.random.RandomState(len(distribution) + len(sharding))
    sizes = (rng.lognormal(3, 1.5, size=23) + 1).astype(int).tolist()
    files = _sized_files(sizes)
    settings = PlanSettings.from_mode(
        sharding=sharding,
        num_shards=3,
        partition_epoch=2,
        num_epochs=7,
        random_seed_offset=5,
        distribution=distribution,
    )
    path = str(tmp_path / "plan.npz")
    save_plan(ShardPlan(files, sizes, settings), path)
    got = _ranks_read(files, path, settings, num_epochs=7, monkeypatch=monkeypatch)
    assert got == _plan_bins(path, num_epochs=7)
    if distribution == "returnn":  # and that is what RETURNN's own dataset reads without the plan
        assert got == returnn_files(files, sizes, settings, num_epochs=7)


def test_an_old_plan_trains_its_own_bins_after_the_algorithm_changed(monkeypatch):
    """The stored format-1 plans (written before format 2, tests/data/plans) with files that do not exist:
    nothing is statted; and with the balanced cut replaced, the old balanced plan still gives its bins."""
    spec = importlib.util.spec_from_file_location("_make_plans", os.path.join(_PLANS, "make_plans.py"))
    made = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(made)
    refuse = dataclasses.replace(
        cut_module.CUTS["balanced"], cut=lambda *a, **k: (_ for _ in ()).throw(AssertionError("cut"))
    )
    monkeypatch.setitem(cut_module.CUTS, "balanced", refuse)
    for name in ("format1_returnn", "format1_balanced", "format2_flexible", "format1_returnn_unsharded"):
        path = os.path.join(_PLANS, name + ".npz")
        mode = "unsharded" if name.endswith("unsharded") else "sharded"
        settings = PlanSettings.from_mode(sharding=mode, distribution=name.split("_")[1], **made.SETTINGS)
        got = _ranks_read(made.KEYS, path, settings, num_epochs=7, monkeypatch=monkeypatch)
        assert got == _plan_bins(path, num_epochs=7), name


@pytest.fixture()
def planned(tmp_path):
    sizes = list(range(1, 25))
    files = _sized_files(sizes)
    settings = PlanSettings(num_shards=2, partition_epoch=3, num_epochs=6, random_seed_offset=1)
    path = str(tmp_path / "plan.npz")
    save_plan(ShardPlan(files, sizes, settings), path)
    return files, settings, path


def _start(files, path, settings, *, rank=0, num_shards=None, seed_offset=None, config=None, **opts):
    num_shards = settings.num_shards if num_shards is None else num_shards
    offset = settings.random_seed_offset if seed_offset is None else seed_offset
    with as_rank(rank, num_shards, dataset_random_seed_offset=offset, extra_config=config):
        dataset = _dataset(files, path, settings, **opts)
        dataset.init_seq_order(epoch=1)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(files="drop"), "the plan has 24 files, the dataset 23"),
        (dict(files="swap"), "the plan has the dataset's files in another order; first difference at entry 0"),
        (dict(files="other"), "1 of the dataset's 24 files are not in the plan"),
        (dict(partition_epoch=4), "the plan has partition_epoch=3, the dataset 4"),
        (dict(num_shards=3), "the plan is for 2 ranks, the training has 3"),
        (dict(distrib_shard_files=False), "the plan is 'sharded', the dataset unsharded"),
        (dict(seq_ordering="default"), "the plan has seq_ordering='random', the dataset 'default'"),
        (
            dict(distribution="balanced"),
            "the plan was cut with distribution='returnn', the dataset asks for 'balanced'",
        ),
        (dict(seed_offset=2), "it shuffles full epoch 0 with seed 2, this dataset on rank 0 with seed 3"),
        (dict(config={"num_epochs": 6}), "does not hold what the training reads for the config's num_epochs=6"),
    ],
)
def test_a_plan_that_does_not_fit_fails_at_start_with_the_difference(planned, change, message):
    files, settings, path = planned
    kind = change.pop("files", None)
    if kind == "drop":
        files = files[:-1]
    elif kind == "swap":
        files = [files[1], files[0]] + files[2:]
    elif kind == "other":
        files = files[:-1] + [files[-1] + ".other"]
    start = {k: change.pop(k) for k in ("num_shards", "seed_offset", "config") if k in change}
    opts = dict(change)
    if "config" in start:
        opts["preload_next_n_sub_epochs"] = 1
    with pytest.raises(ValueError, match="does not fit") as info:
        _start(files, path, settings, **start, **opts)
    assert message in str(info.value)
    if "seed" not in message:
        assert "Make the plan from this training's file list and settings" in str(info.value)


def test_epochs_beyond_the_plan_say_how_many_to_plan(planned):
    files, settings, path = planned  # 6 sub-epochs = 2 full epochs of partition_epoch=3
    with as_rank(1, 2, dataset_random_seed_offset=1):
        dataset = _dataset(files, path, settings, preload_next_n_sub_epochs=1)
        for epoch in range(1, 6):
            dataset.init_seq_order(epoch=epoch)
        with pytest.raises(
            ValueError,
            match=r"reads at sub-epoch 6: .*sub-epoch 7 is read .* plan 3 full epochs, "
            r"e.g. ShardPlanJob\(..., num_epochs=6\)",
        ):
            dataset.init_seq_order(epoch=6)
    with as_rank(0, 2, dataset_random_seed_offset=1, extra_config={"num_epochs": 5}):
        dataset = _dataset(files, path, settings, preload_next_n_sub_epochs=1)
        dataset.init_seq_order(epoch=1)  # num_epochs=5 plus one preloaded sub-epoch fit in 6


def test_pickled_dataset_keeps_the_plan(planned, monkeypatch):
    """torch DataLoader workers get the dataset pickled (Dataset.__reduce__): the copy reads the same bins."""
    import pickle

    files, settings, path = planned
    with as_rank(1, 2, dataset_random_seed_offset=1):
        dataset = _dataset(files, path, settings)
        dataset.init_seq_order(epoch=1)
        copy = pickle.loads(pickle.dumps(dataset))
        assert copy.plan_path == path and copy.distribution is None
        with monkeypatch.context() as m:
            _no_stat(m)
            assert dfd_files_per_epoch(copy, num_epochs=6) == _plan_bins(path, num_epochs=6)[1]


_RISING, _EQUAL = list(range(1, 25)), [4] * 24  # the oldest release cuts the rising sizes otherwise, equal ones alike


@pytest.mark.parametrize(
    "distribution, planned_for, sizes, refused",
    [
        ("returnn", "1.20240620.64807", _RISING, True),  # before 1.20240705.144031 re-averaged the rest: other bins
        ("returnn", "1.20240620.64807", _EQUAL, False),  # another cut, but the same bins for these files
        ("returnn", "1.20250115.110555", _RISING, False),  # an older release that cuts as this one does
        ("returnn", None, _RISING, False),  # the newest's cut: this release's
        ("balanced", "1.20240620.64807", _RISING, False),  # i6_shard's own cut is the same on every release
    ],
)
def test_a_plan_cut_for_another_release_is_refused_where_that_release_cuts_otherwise(
    tmp_path, distribution, planned_for, sizes, refused
):
    files = _sized_files(sizes)
    settings = PlanSettings(num_shards=2, partition_epoch=3, num_epochs=6, distribution=distribution)
    path = str(tmp_path / "plan.npz")
    save_plan(ShardPlan(files, sizes, settings, returnn_version=planned_for), path)
    if not refused:
        _start(files, path, settings)
        return
    import returnn

    with pytest.raises(ValueError, match="does not fit") as info:
        _start(files, path, settings)
    message = str(info.value)
    assert f"as RETURNN {planned_for} cuts" in message, message
    assert f"RETURNN {returnn.__version__}" in message and "1.20240705.144031" in message, message
    assert f"returnn_version={returnn.__version__!r}" in message, message


def _start_in_sharding_worker(files, path, settings, monkeypatch):
    """Worker 1 of rank 0's 2 DataLoader workers that shard (2 ranks): ReturnnDatasetIterDataPipe.reset calls
    set_sharding(num_shards=4, shard_index=1) on the worker's copy before init_seq_order."""
    from i6_shard.returnn_ext import distrib_files

    monkeypatch.setattr(distrib_files, "_loader_workers", lambda: 2)
    with as_rank(0, 2, dataset_random_seed_offset=settings.random_seed_offset):
        dataset = _dataset(files, path, settings)
        dataset.set_sharding(num_shards=4, shard_index=1)
        dataset.init_seq_order(epoch=1)
        return dataset


def test_dataloader_workers_that_shard_take_the_plan_of_ranks_times_workers_and_refuse_one_of_the_ranks(
    planned, tmp_path, monkeypatch
):
    """The graph's reason (worker_shards_problem) for a plan of the ranks only, said at start-up in the same words;
    the plan of ranks * workers shards (what ShardPlanJob.for_training makes) is followed."""
    files, settings, path = planned
    with pytest.raises(ValueError, match="does not fit") as info:
        _start_in_sharding_worker(files, path, settings, monkeypatch)
    assert "the plan is for num_shards=2, but the files are cut into 4 shards: 2 ranks, each with 2" in str(info.value)
    four = dataclasses.replace(settings, num_shards=4)
    path4 = str(tmp_path / "plan4.npz")
    save_plan(ShardPlan(files, list(range(1, 25)), four), path4)
    dataset = _start_in_sharding_worker(files, path4, four, monkeypatch)
    assert list(dataset._files_order_cache[0][0]) == _plan_bins(path4, num_epochs=1)[1][0]  # shard 1's bin


@pytest.mark.parametrize("name, shard", [("train", False), ("train", True), ("dev", False)])
def test_a_dataloader_worker_that_reads_all_of_its_ranks_data_refuses_to_start(planned, monkeypatch, name, shard):
    """In worker 1 of rank 0's 2 DataLoader workers under behavior_version 24 (no worker sharding), the train dataset
    raises at start-up the reader's one rule in the graph checks' words (every sequence would train twice per epoch);
    given a worker's shard (ReturnnDatasetIterDataPipe.reset's set_sharding) it does not, nor does an eval dataset
    (its sequences are evaluated twice: logged)."""
    from i6_shard.returnn_config.reader.rules import duplicate_workers_problem
    from i6_shard.returnn_ext import distrib_files

    files, settings, path = planned
    config = {"backend": "torch", "behavior_version": 24, "torch_dataloader_opts": {"num_workers": 2}}
    monkeypatch.setattr(distrib_files, "_loader_workers", lambda: 2)
    with as_rank(0, 2, dataset_random_seed_offset=settings.random_seed_offset, extra_config=config):
        dataset = _dataset(files, path, settings, name=name)
        if shard:
            dataset.set_sharding(num_shards=2, shard_index=1)
        refused = None
        try:
            dataset.init_seq_order(epoch=1)
        except ValueError as exc:
            refused = str(exc)
    rule = duplicate_workers_problem({"torch_distributed": {}, **config})
    assert "num_workers=2" in rule and "behavior_version=24" in rule
    if name == "train" and not shard:
        assert refused == f"{dataset}: {rule}", refused
    else:
        assert refused is None or "DataLoader workers of a rank" not in refused, refused
