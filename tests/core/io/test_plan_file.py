"""The plan file: read back with numpy alone it gives each rank the files RETURNN's own
DistributeFilesDataset reads; it keeps same_seed_on_all_ranks only when set; other files are refused.
(The settings' round trip in every sharding mode: tests/core/pure/test_settings.py.)"""

import numpy as np
import pytest

from i6_shard.core import PlanSettings, ShardPlan, load_plan, read_plan_file, save_plan
from i6_shard.core.io.npz import save_npz

pytest.importorskip("returnn.datasets.distrib_files", reason="parity tests need returnn (test extra)")

from ...returnn_ranks import returnn_files  # noqa: E402


@pytest.mark.parametrize("sharding", ["sharded", "unsharded", "unsharded_same_seed"])
def test_plan_file_round_trip_and_numpy_only_reading(tmp_path, sharding):
    keys = [f"/data/ü {i}\n.hdf" for i in range(30)]
    sizes = np.random.RandomState(0).randint(0, 100, size=30)
    settings = PlanSettings.from_mode(
        sharding=sharding, num_shards=3, partition_epoch=4, random_seed_offset=5, num_epochs=9
    )
    path = tmp_path / "plan.npz"
    save_plan(ShardPlan(keys, sizes, settings), path)
    loaded = read_plan_file(path, verify=True)
    assert loaded.num_epochs == 9 and loaded.plan.keys == keys and loaded.plan.settings == settings
    expected = returnn_files(keys, sizes.tolist(), settings, num_epochs=9)  # [rank][epoch - 1]
    # Reading with numpy alone, as the file format documents it.
    with np.load(path, allow_pickle=False) as d:
        raw_keys = bytes(d["keys_utf8"]).decode("utf-8", "surrogatepass").split("\0")
        p = int(d["partition_epoch"])
        sharded = bool(d["distrib_shard_files"])
        for epoch in range(1, 10):
            for r in range(3):
                layout = 0 if sharded else r
                b = (r * p if sharded else 0) + (epoch - 1) % p
                order = d["orders"][(epoch - 1) // p, layout]
                bnd = d["bounds"][(epoch - 1) // p, layout]
                assert [raw_keys[i] for i in order[bnd[b] : bnd[b + 1]].tolist()] == expected[r][epoch - 1]


def test_same_seed_on_all_ranks_is_kept_in_the_plan_file_only_when_set(tmp_path):
    keys, sizes = [f"f{i}" for i in range(12)], list(range(12))
    common = dict(num_shards=3, partition_epoch=2, distrib_shard_files=False, random_seed_offset=4, num_epochs=4)
    for same in (False, True):
        save_plan(ShardPlan(keys, sizes, PlanSettings(same_seed_on_all_ranks=same, **common)), tmp_path / f"{same}.npz")
        with np.load(tmp_path / f"{same}.npz") as d:
            assert ("same_seed_on_all_ranks" in d.files) is same  # plans without it keep their old bytes
        loaded = read_plan_file(tmp_path / f"{same}.npz", verify=True)
        assert loaded.plan.settings.same_seed_on_all_ranks is same
        files = [[loaded.plan.files_for(epoch=e, shard_index=r) for e in range(1, 5)] for r in range(3)]
        assert (files[0] == files[1] == files[2]) is same


def test_load_plan_rejects_other_files(tmp_path):
    save_npz(tmp_path / "x.npz", {"sizes": np.zeros(3, dtype=np.int64)})
    with pytest.raises(ValueError, match="is not a plan file"):
        load_plan(tmp_path / "x.npz")
    with pytest.raises(FileNotFoundError, match="python -m i6_shard plan"):
        load_plan(tmp_path / "missing.npz")


def test_stored_bins_that_repeat_or_skip_files_are_refused_by_the_dataset(tmp_path):
    """A plan file rewritten so that its stored bins list one file 8 times (a valid zip, indices in range) is
    refused where the bins are read, by the RETURNN-side class too: the stored bins are checked, not recomputed."""
    pytest.importorskip("h5py", reason="the dataset reads real HDF files: pip install h5py")
    from i6_shard.core.io.hdf_corpus import write_hdf_corpus
    from i6_shard.core.io.plan_file import read_plan_layout
    from i6_shard.core.planning import plan_arrays

    keys = write_hdf_corpus(str(tmp_path / "data"), num_files=8, seed=1)
    plan = ShardPlan(keys, list(range(1, 9)), PlanSettings(num_shards=2, partition_epoch=2, num_epochs=4))
    arrays = plan_arrays(plan)
    arrays["orders"][0, 0, :] = 3  # every bin of full epoch 0 reads file 3
    path = str(tmp_path / "plan.npz")
    save_npz(path, arrays, kind="plan file", uncompressed=("orders", "bounds"))
    with pytest.raises(
        ValueError,
        match=r"is corrupt: full epoch 0 \(layout 0\): the bins do not cover every file "
        r"entry exactly once \(7 missing, 1 repeated\)",
    ):
        read_plan_layout(path, full_epoch_0idx=0)
    read_plan_layout(path, full_epoch_0idx=1)  # the other full epoch is whole
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn dm-tree")
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    from i6_shard.returnn_config import sharded_files_dataset
    from i6_shard.returnn_config.pycode import resolve_refs

    d = sharded_files_dataset(
        keys,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=2,
        num_shards=2,
        plan=path,
        use_worker_proc=False,
    )
    with global_config_ctx(Config({"__debug_dummy_distributed_rank_and_size": (0, 2)})):
        dataset = init_dataset(resolve_refs(d))
        with pytest.raises(ValueError, match="the bins do not cover every file entry exactly once"):
            dataset.init_seq_order(epoch=1)


def test_a_huge_setting_in_a_plan_file_gives_a_bounded_message(tmp_path):
    """A crafted plan file whose distribution is 10 M characters: one short message naming the setting."""
    from i6_shard.core.planning import plan_arrays

    plan = ShardPlan(
        [f"/d/{i}" for i in range(4)], [1, 2, 3, 4], PlanSettings(num_shards=2, partition_epoch=2, num_epochs=2)
    )
    arrays = plan_arrays(plan)
    arrays["distribution"] = np.array("x" * 10_000_000)
    path = str(tmp_path / "plan.npz")
    save_npz(path, arrays, kind="plan file", uncompressed=("orders", "bounds"))
    with pytest.raises(ValueError) as info:
        load_plan(path)
    assert "distribution=" in str(info.value) and len(str(info.value)) < 2000, str(info.value)[:300]
