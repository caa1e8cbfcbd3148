"""ShardedDistributeFilesDataset fed a costs archive through ``file_sizes`` (directly and from the builder),
with the real RETURNN rank by rank: the balanced split by frames (sequences, expected steps) reads exactly
the plan made from the same archive, which differs from the split by bytes, and no file is stat-ed for its size."""

import os

import numpy as np
import pytest

from i6_shard.returnn_config.pycode import resolve_refs
from tests.deps import H5PY_REASON

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
pytest.importorskip("h5py", reason=H5PY_REASON)

from returnn.config import Config, global_config_ctx  # noqa: E402
from returnn.datasets.basic import init_dataset  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.returnn_config import sharded_files_dataset  # noqa: E402
from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs  # noqa: E402
from i6_shard.core.pure.batching import Batching  # noqa: E402

from ..hdf_data import write_tiny_hdf_files  # noqa: E402
from .test_distrib_files import NUM_SHARDS, PARTITION_EPOCH, make_dataset, read_sub_epoch  # noqa: E402


@pytest.mark.parametrize(
    "unit, split",
    [
        ("frames", {}),
        ("seqs", {}),
        ("steps", {}),
        ("frames", {"distribution": "flexible", "max_sub_epoch_deviation": 0.9}),
        ("steps", {"distribution": "flexible", "max_sub_epoch_deviation": 0.9}),
        ("steps", {"distribution": "flexible_auto"}),
    ],
)
def test_balanced_by_costs_reads_its_plan(tmp_path, monkeypatch, unit, split):
    """Also the flexible split by steps with room for large files, which reaches the step floor (docs/units.md),
    and with its bound chosen per full epoch."""
    split = {"distribution": "balanced", **split}
    rng = np.random.RandomState(4)
    files = write_tiny_hdf_files(
        str(tmp_path),
        num_files=18,
        seed=4,
        frames=(1, 90),
        seqs_per_file=[int(min(30, max(1, rng.lognormal(np.log(5), 1.0)))) for _ in range(18)],
    )
    batching = Batching(batch_size=300, max_seqs=6) if unit == "steps" else None
    costs = collect_file_costs(files, unit=unit, num_procs=1, batching=batching)
    path = str(tmp_path / "costs.npz")
    save_file_costs(costs, path)
    settings = core.PlanSettings(num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, unit=unit, **split)
    plan = core.ShardPlan(costs.keys, costs.costs, settings)
    by_bytes = core.ShardPlan(files, core.collect_file_sizes(files).sizes, settings.replace(unit="bytes"))
    epochs = range(1, 2 * PARTITION_EPOCH + 1)
    assert any(
        plan.files_for(epoch=e, shard_index=r) != by_bytes.files_for(epoch=e, shard_index=r)
        for e in epochs
        for r in range(NUM_SHARDS)
    )  # not vacuous: the unit changes the bins

    def trap(p):
        raise AssertionError(f"os.path.getsize({p!r}) was called although costs were given")

    monkeypatch.setattr(os.path, "getsize", trap)
    corpus = {"files": files}
    built = sharded_files_dataset(
        files,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=PARTITION_EPOCH,
        file_sizes=path,
        use_worker_proc=False,
        num_shards=NUM_SHARDS,
        **split,
    )
    for rank in range(NUM_SHARDS):
        with global_config_ctx(Config({"__debug_dummy_distributed_rank_and_size": (rank, NUM_SHARDS)})):
            from_builder = init_dataset(resolve_refs(built))  # as RETURNN loads it from a config
        for dataset in (make_dataset(corpus, rank, file_sizes=path, **split), from_builder):
            for epoch in epochs:
                read, _ = read_sub_epoch(dataset, epoch)
                assert read == plan.files_for(epoch=epoch, shard_index=rank), (unit, rank, epoch)
            dataset.finish_epoch(free_resources=True)
