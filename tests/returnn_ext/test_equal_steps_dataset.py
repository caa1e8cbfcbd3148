"""Distribution "equal_steps" in the real RETURNN, rank by rank (tests/returnn_ranks.py): ShardedDistributeFilesDataset
with the plan file (``plan=``) and without it (cutting the bins itself from a costs archive with per-sequence lengths
and the engine settings of RETURNN's own config) gives every rank exactly the plan's files, each file once per full
epoch; and the plan file's recorded engine settings are checked against the config the training runs under."""

import os
import tempfile
from typing import List

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from tests.deps import H5PY_REASON

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
pytest.importorskip("h5py", reason=H5PY_REASON)

from returnn.datasets.basic import init_dataset  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs  # noqa: E402
from i6_shard.core.io.plan_file import save_plan_arrays  # noqa: E402
from i6_shard.returnn_ext import ShardedDistributeFilesDataset  # noqa: E402

from ..hdf_data import write_tiny_hdf_files  # noqa: E402
from ..returnn_ranks import as_rank, dfd_files_per_epoch, placeholder_sub_epoch_dataset  # noqa: E402
from .test_plan_dataset import _plan_bins  # noqa: E402


def _corpus(directory: str, *, seed: int, num_files: int) -> str:
    rng = np.random.RandomState(seed)
    files = write_tiny_hdf_files(
        directory,
        num_files=num_files,
        seed=seed,
        frames=(1, 60),
        seqs_per_file=[int(min(25, max(1, rng.lognormal(np.log(4), 0.9)))) for _ in range(num_files)],
    )
    costs_path = os.path.join(directory, "costs.npz")
    save_file_costs(collect_file_costs(files, unit="frames", num_procs=1), costs_path)
    return costs_path


def _dataset(files: List[str], *, partition_epoch: int, **opts):
    return init_dataset(
        {
            "class": ShardedDistributeFilesDataset,
            "files": list(files),
            "get_sub_epoch_dataset": placeholder_sub_epoch_dataset,
            "use_worker_proc": False,
            "partition_epoch": partition_epoch,
            "seq_ordering": "random",
            "distrib_shard_files": True,
            "sharding_fix": True,
            **opts,
        }
    )


_TORCH_DISTRIBUTED = st.sampled_from(
    [
        {},
        {"reduce_type": "param", "param_sync_step": 2},
        {"sync": [{"group": "world", "type": "grad"}]},
        {"sync": [{"group": 1, "type": "param", "every": 1}, {"group": "world", "type": "param", "every": 3}]},
    ]
)


@settings(max_examples=6, deadline=None, phases=(Phase.explicit, Phase.generate))
@given(
    seed=st.integers(0, 2**16),
    num_shards=st.integers(2, 3),
    partition_epoch=st.integers(1, 3),
    batch_size=st.sampled_from([None, 80, 150]),
    max_seqs=st.sampled_from([None, 2, 4]),
    max_seq_length=st.sampled_from([None, 50]),
    accum=st.sampled_from([1, 2]),
    torch_distributed=_TORCH_DISTRIBUTED,
    seed_offset=st.integers(0, 5),
)
def test_every_rank_reads_exactly_the_equal_steps_plan_with_and_without_the_plan_file(
    seed, num_shards, partition_epoch, batch_size, max_seqs, max_seq_length, accum, torch_distributed, seed_offset
):
    if batch_size is None and max_seqs is None:
        max_seqs = 3
    num_files = 8 * num_shards * partition_epoch // 2 + 2
    num_epochs = 2 * partition_epoch  # two full epochs (the plan also holds the one preloaded sub-epoch)
    with tempfile.TemporaryDirectory() as tmp:
        costs_path = _corpus(tmp, seed=seed, num_files=num_files)
        files = core.load_file_sizes(costs_path).keys
        engine = {
            "batch_size": batch_size,
            "max_seqs": max_seqs,
            "max_seq_length": max_seq_length,
            "accum_grad_multiple_step": accum,
            "torch_distributed": torch_distributed,
        }
        request = core.PlanRequest.from_options(
            num_shards=num_shards,
            partition_epoch=partition_epoch,
            num_epochs=num_epochs,
            random_seed_offset=seed_offset,
            distribution="equal_steps",
            **engine,
        )
        outputs = core.plan_archive(costs_path, request, compare=False)
        plan_path = os.path.join(tmp, "plan.npz")
        save_plan_arrays(outputs.arrays, plan_path)
        planned = _plan_bins(plan_path, num_epochs=num_epochs)
        config = {k: v for k, v in engine.items() if v is not None}
        for rank in range(num_shards):
            with as_rank(rank, num_shards, dataset_random_seed_offset=seed_offset, extra_config=config):
                with_plan = _dataset(files, partition_epoch=partition_epoch, plan=plan_path)
                got_plan = dfd_files_per_epoch(with_plan, num_epochs=num_epochs)
                itself = _dataset(
                    files, partition_epoch=partition_epoch, distribution="equal_steps", file_sizes=costs_path
                )
                got_itself = dfd_files_per_epoch(itself, num_epochs=num_epochs)
            assert got_plan == planned[rank], rank
            assert got_itself == planned[rank], rank
        for full in range(num_epochs // partition_epoch):  # every file once per full epoch, over ranks and sub-epochs
            read = [
                f
                for rank in range(num_shards)
                for sub in range(partition_epoch)
                for f in planned[rank][full * partition_epoch + sub]
            ]
            assert sorted(read) == sorted(files), full


def test_equal_steps_bins_differ_from_flexible_auto_and_lose_less(tmp_path):
    """Not vacuous: on this corpus the equalized bins are not flexible_auto's, and the simulated training drops
    less of them."""
    costs_path = _corpus(str(tmp_path), seed=3, num_files=30)
    opts = dict(num_shards=3, partition_epoch=2, num_epochs=4, batch_size=120, max_seqs=4)
    flex = core.plan_archive(costs_path, core.PlanRequest.from_options(distribution="flexible_auto", **opts))
    equal = core.plan_archive(costs_path, core.PlanRequest.from_options(distribution="equal_steps", **opts))
    assert not np.array_equal(flex.arrays["orders"], equal.arrays["orders"]) or not np.array_equal(
        flex.arrays["bounds"], equal.arrays["bounds"]
    )
    dropped = [o.ranks.simulation["dropped"].sum() for o in (flex, equal)]
    assert dropped[1] < dropped[0], dropped


@pytest.fixture()
def equal_plan(tmp_path):
    costs_path = _corpus(str(tmp_path), seed=1, num_files=20)
    request = core.PlanRequest.from_options(
        num_shards=2,
        partition_epoch=2,
        num_epochs=2,
        distribution="equal_steps",
        batch_size=100,
        max_seqs=3,
        torch_distributed={"reduce_type": "param", "param_sync_step": 2},
    )
    outputs = core.plan_archive(costs_path, request, compare=False)
    plan_path = str(tmp_path / "plan.npz")
    save_plan_arrays(outputs.arrays, plan_path)
    return core.load_file_sizes(costs_path).keys, plan_path, costs_path


_MATCHING = {"batch_size": 100, "max_seqs": 3, "torch_distributed": {"reduce_type": "param", "param_sync_step": 2}}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"batch_size": 200}, "simulated with batch_size=100, the config has batch_size=200"),
        ({"max_seqs": 5}, "simulated with max_seqs=3, the config has max_seqs=5"),
        ({"max_seq_length": 40}, "simulated with max_seq_length=None, the config has max_seq_length=40"),
        ({"accum_grad_multiple_step": 2}, "accum_grad_multiple_step=1, the config has accum_grad_multiple_step=2"),
        (
            {"torch_distributed": {}},
            "simulated with torch_distributed={'param_sync_step': 2, 'reduce_type': 'param'}, the config has "
            "torch_distributed={}",
        ),
    ],
)
def test_a_training_with_other_engine_settings_than_the_plans_is_refused(equal_plan, change, message):
    files, plan_path, _ = equal_plan
    with as_rank(0, 2, extra_config={**_MATCHING, **change}):
        dataset = _dataset(files, partition_epoch=2, plan=plan_path)
        with pytest.raises(ValueError, match="re-plan with the config's") as info:
            dataset.init_seq_order(epoch=1)
    assert message in str(info.value)


def test_the_plans_engine_settings_pass_with_the_backend_and_dataset_distribution_set(equal_plan):
    files, plan_path, _ = equal_plan
    config = {**_MATCHING, "torch_distributed": {**_MATCHING["torch_distributed"], "dataset_distribution": "shard"}}
    with as_rank(1, 2, extra_config={**config, "max_seqs": 3}):
        dataset = _dataset(files, partition_epoch=2, plan=plan_path)
        dataset.init_seq_order(epoch=1)


def test_a_plan_without_engine_settings_says_nothing_is_checked(tmp_path, capsys):
    from returnn.log import log

    log.initialize(verbosity=[5])
    sizes = list(range(1, 13))
    keys = [f"/nonexistent/f{i}.hdf" for i in sizes]
    settings = core.PlanSettings(num_shards=2, partition_epoch=2, num_epochs=3)
    path = str(tmp_path / "plan.npz")
    core.save_plan(core.ShardPlan(keys, sizes, settings), path)
    with as_rank(0, 2, extra_config={"batch_size": 5000}):
        _dataset(keys, partition_epoch=2, plan=path).init_seq_order(epoch=1)
    assert "records no engine settings" in capsys.readouterr().out


@pytest.mark.parametrize(
    "opts, config, message",
    [
        ({"file_sizes": None}, {"batch_size": 100}, "no file_sizes was given"),
        ({}, {}, "no batching was given"),
        ({}, {"batch_size": 100, "max_seq_length": {"data": 50, "classes": 9}}, "names the data keys"),
    ],
)
def test_equal_steps_without_a_plan_refuses_what_it_cannot_cut(equal_plan, opts, config, message):
    files, _, costs_path = equal_plan
    with as_rank(0, 2, extra_config=config):
        dataset = _dataset(files, partition_epoch=2, distribution="equal_steps", **{"file_sizes": costs_path, **opts})
        with pytest.raises(ValueError, match=message):
            dataset.init_seq_order(epoch=1)
