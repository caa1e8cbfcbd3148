"""The per-node cache footprint against a brute-force count over the plan's bins (sets of keys), against
the sub-epoch datasets the real RETURNN DistributeFilesDataset keeps alive per rank, and its checks."""

import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core.pure import PlanSettings
from i6_shard.core.pure.plan import ShardPlan
from i6_shard.core.pure.cache import (
    DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS,
    NodeCache,
    compute_cache_footprint,
    parse_bytes,
    partition_epoch_candidates,
    partition_epochs_fitting,
)
from tests.strategies import node_caches, plan_settings_kwargs


def brute_force(plan, node_cache, num_epochs, constant=None):
    """Held bytes/files and shared-FS bytes per (sub-epoch, node), with Python sets of keys; ``constant``:
    {key: size} of files every sub-epoch dataset reads besides its bin's."""
    constant = constant or {}
    size_of = dict(constant)
    for key, cost in zip(plan.keys, plan.costs.tolist()):
        size_of.setdefault(key, cost)  # one cached copy per key
    rpn, n_pre = node_cache.ranks_per_node, node_cache.preload_next_n_sub_epochs
    num_nodes = -(-plan.num_shards // rpn)
    held, files, shared = [], [], []
    before = [set() for _ in range(num_nodes)]
    for e in range(1, num_epochs + 1):
        row_held, row_files, row_shared = [], [], []
        for n in range(num_nodes):
            ranks = [r for r in range(plan.num_shards) if r // rpn == n]
            if node_cache.cached_file:
                now = set(constant)
                for j in range(e, e + n_pre + 1):
                    for r in ranks:
                        now |= set(plan.files_for(epoch=j, shard_index=r))
                row_held.append(sum(size_of[k] for k in now))
                row_files.append(len(now))
                row_shared.append(sum(size_of[k] for k in now - before[n]))
                before[n] = now
            else:
                row_held.append(0)
                row_files.append(0)
                row_shared.append(
                    sum(int(plan.costs[i]) for r in ranks for i in plan.file_indices_for(epoch=e, shard_index=r))
                    + len(ranks) * sum(constant.values())
                )
        held.append(row_held)
        files.append(row_files)
        shared.append(row_shared)
    return held, files, shared


@st.composite
def footprint_cases(draw):
    kwargs = draw(plan_settings_kwargs(with_num_epochs=True))
    settings_ = PlanSettings(**kwargs)
    num_files = draw(st.integers(settings_.num_bins, settings_.num_bins + 12))
    pool = draw(st.sampled_from([None, 3, 6]))  # None: every key once; else keys drawn from a few, with repeats
    keys = (
        [f"f{i}" for i in range(num_files)]
        if pool is None
        else draw(st.lists(st.sampled_from([f"k{i}" for i in range(pool)]), min_size=num_files, max_size=num_files))
    )
    sizes = draw(st.lists(st.integers(0, 1000), min_size=num_files, max_size=num_files))
    return ShardPlan(keys, sizes, settings_), draw(node_caches(max_ranks_per_node=kwargs["num_shards"] + 1))


@settings(max_examples=examples(150))
@given(footprint_cases())
def test_footprint_equals_a_brute_force_count_over_the_bins(case):
    plan, node_cache = case
    num_epochs = plan.settings.num_epochs
    try:
        held, files, shared = brute_force(plan, node_cache, num_epochs)
    except ValueError as exc:  # a preload past num_epochs needs a seed beyond numpy's range: RETURNN fails too
        assert "takes seeds in [0, 2**32)" in str(exc)
        with pytest.raises(ValueError, match=r"RETURNN creates ahead \(preload_next_n_sub_epochs\) need full epoch"):
            compute_cache_footprint(plan, node_cache=node_cache, num_epochs=num_epochs)
        return
    fp = compute_cache_footprint(plan, node_cache=node_cache, num_epochs=num_epochs)
    assert fp.held_bytes.tolist() == held
    assert fp.held_files.tolist() == files
    assert fp.shared_fs_bytes.tolist() == shared
    assert fp.peak_bytes == max(max(row) for row in held)
    epoch, node = fp.peak_place
    assert held[epoch - 1][node] == fp.peak_bytes


@settings(max_examples=examples(40))
@given(footprint_cases())
def test_stored_layouts_give_the_same_footprint(case):
    plan, node_cache = case
    if (
        node_cache.preload_next_n_sub_epochs
        and plan.settings.seq_ordering == "random"
        and plan.settings.random_seed_offset > 2**31
        and plan.settings.fixed_random_seed is None
    ):
        return  # preloads past num_epochs may need seeds beyond numpy's range (the test above covers that)
    stored = {}

    def layout(k, r):  # copies, as a plan file would give them back
        stored[(k, r)] = tuple(np.array(a, dtype=np.uint32) for a in plan.layout(full_epoch_0idx=k, shard_index=r))
        return stored[(k, r)]

    num_epochs = plan.settings.num_epochs
    a = compute_cache_footprint(plan, node_cache=node_cache, num_epochs=num_epochs)
    b = compute_cache_footprint(plan, node_cache=node_cache, num_epochs=num_epochs, layout=layout)
    assert np.array_equal(a.held_bytes, b.held_bytes) and np.array_equal(a.shared_fs_bytes, b.shared_fs_bytes)
    num_full = -(-num_epochs // plan.partition_epoch)
    assert stored and max(k for k, _ in stored) < num_full  # preloads past the stored full epochs are computed


def test_footprint_by_hand_with_a_preload_across_the_full_epoch_boundary():
    # default order: bins [a] [b] [c] [d] every full epoch; rank 0 reads a, b; rank 1 reads c, d.
    plan = ShardPlan(
        list("abcd"), [1, 10, 100, 1000], PlanSettings(num_shards=2, partition_epoch=2, seq_ordering="default")
    )
    one_per_node = compute_cache_footprint(plan, node_cache=NodeCache(ranks_per_node=1), num_epochs=3)
    assert one_per_node.held_bytes.tolist() == [[11, 1100], [11, 1100], [11, 1100]]
    # epoch 2 preloads epoch 3, whose file (a, resp. c) the node still holds for epoch 1's dataset: no new reads
    assert one_per_node.shared_fs_bytes.tolist() == [[11, 1100], [0, 0], [0, 0]]
    no_preload = compute_cache_footprint(
        plan, node_cache=NodeCache(ranks_per_node=2, preload_next_n_sub_epochs=0), num_epochs=2
    )
    assert no_preload.held_bytes.tolist() == [[101], [1010]] and no_preload.peak_place == (2, 0)
    direct = compute_cache_footprint(plan, node_cache=NodeCache(ranks_per_node=2, cached_file=False), num_epochs=2)
    assert direct.peak_bytes == 0 and direct.shared_fs_bytes.tolist() == [[101], [1010]]


def test_two_ranks_of_a_node_share_one_copy_unsharded():
    # unsharded, same seed on all ranks: both ranks of the node read the same files, cached once
    plan = ShardPlan(
        list("abcd"),
        [1, 2, 3, 4],
        PlanSettings(
            num_shards=2,
            partition_epoch=2,
            distrib_shard_files=False,
            same_seed_on_all_ranks=True,
            random_seed_offset=5,
        ),
    )
    fp = compute_cache_footprint(
        plan, node_cache=NodeCache(ranks_per_node=2, preload_next_n_sub_epochs=0), num_epochs=2
    )
    per_rank = [sum(plan.costs[plan.file_indices_for(epoch=e, shard_index=0)]) for e in (1, 2)]
    assert fp.held_bytes[:, 0].tolist() == per_rank
    direct = compute_cache_footprint(plan, node_cache=NodeCache(ranks_per_node=2, cached_file=False), num_epochs=2)
    assert direct.shared_fs_bytes[:, 0].tolist() == [2 * b for b in per_rank]  # each rank reads its own


def test_node_cache_checks_its_values():
    with pytest.raises(ValueError, match="ranks_per_node=0 must be a positive int"):
        NodeCache(ranks_per_node=0)
    with pytest.raises(ValueError, match="preload_next_n_sub_epochs=-1 must be a non-negative int"):
        NodeCache(ranks_per_node=1, preload_next_n_sub_epochs=-1)
    with pytest.raises(TypeError, match="cached_file='yes' has type str"):
        NodeCache(ranks_per_node=1, cached_file="yes")
    with pytest.raises(TypeError, match="must be a NodeCache"):
        compute_cache_footprint(
            ShardPlan(["a"], [1], PlanSettings(num_shards=1, partition_epoch=1)), node_cache=4, num_epochs=1
        )
    assert NodeCache(ranks_per_node=np.int64(4)).ranks_per_node == 4


@pytest.mark.parametrize(
    "text, expected", [("123", 123), ("2k", 2048), ("1.5 GiB", 3 * 2**29), ("800gb", 8 * 10**11), ("2T", 2 * 2**40)]
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "-5G", "1X", "G", "nanG", "inf"])
def test_parse_bytes_rejects(text):
    with pytest.raises(ValueError, match="is not a byte count"):
        parse_bytes(text)


def test_partition_epochs_fitting_is_the_footprint_of_each_candidate():
    rng = np.random.RandomState(3)
    plan = ShardPlan(
        [f"f{i}" for i in range(60)],
        rng.randint(1, 1000, size=60),
        PlanSettings(num_shards=4, partition_epoch=2, num_epochs=4),
    )
    node_cache = NodeCache(ranks_per_node=2)
    candidates = partition_epoch_candidates(
        num_files=60, settings=plan.settings, cache_size=5000, total_bytes=int(plan.costs.sum()), node_cache=node_cache
    )
    assert plan.partition_epoch in candidates and max(candidates) <= 15
    rows = partition_epochs_fitting(plan, node_cache=node_cache, cache_size=5000, candidates=candidates + [16])
    by_p = {row["partition_epoch"]: row for row in rows}
    assert "cannot fill" in by_p[16]["not_applicable"]
    for p in candidates:
        other = plan.with_settings(partition_epoch=p, num_epochs=3 * p)
        peak = compute_cache_footprint(other, node_cache=node_cache, num_epochs=3 * p).peak_bytes
        assert by_p[p] == {"partition_epoch": p, "peak_bytes": peak, "fits": peak <= 5000}
    assert any(r.get("fits") for r in rows) and not all(r.get("fits") for r in rows)


# --- against the real RETURNN ----------------------------------------------------------------------


def _returnn_held_files(keys, sizes, settings_, *, preload, num_epochs):
    """``[rank][epoch - 1]``: the files of every sub-epoch dataset the real DistributeFilesDataset of each
    rank has alive after ``init_seq_order(epoch)`` (the current one and those it preloads)."""
    from returnn.config import Config, global_config_ctx

    from tests.returnn_ranks import new_dataset, placeholder_sub_epoch_dataset

    with tempfile.TemporaryDirectory() as directory:
        paths = [os.path.join(directory, f"{i}") for i in range(len(keys))]
        for path, size in zip(paths, sizes):
            with open(path, "wb") as f:
                f.truncate(int(size))
        key_of = dict(zip(paths, keys))
        per_rank = []
        for rank in range(settings_.num_shards):
            config = Config({"__debug_dummy_distributed_rank_and_size": (rank, settings_.num_shards)})
            with global_config_ctx(config):
                dataset = new_dataset(
                    paths,
                    get_sub_epoch_dataset=placeholder_sub_epoch_dataset,
                    partition_epoch=settings_.partition_epoch,
                    distrib_shard_files=True,
                    sharding_fix=True,
                    seq_ordering="random",
                    preload_next_n_sub_epochs=preload,
                )
                got = []
                for epoch in range(1, num_epochs + 1):
                    dataset.init_seq_order(epoch=epoch)
                    assert sorted(dataset._workers) == list(range(epoch, epoch + preload + 1))
                    got.append({key_of[p] for w in dataset._workers.values() for p in w.dataset_dict["files"]})
                dataset.finish_epoch(free_resources=True)
            per_rank.append(got)
    return per_rank


@settings(max_examples=examples(8))
@given(
    num_shards=st.integers(1, 4),
    partition_epoch=st.integers(1, 3),
    ranks_per_node=st.integers(1, 3),
    preload=st.integers(0, 2),
    extra=st.integers(0, 6),
    seed=st.integers(0, 2**16),
)
def test_held_files_are_those_of_the_sub_epoch_datasets_returnn_keeps(
    num_shards, partition_epoch, ranks_per_node, preload, extra, seed
):
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
    rng = np.random.RandomState(seed)
    num_files = num_shards * partition_epoch + extra
    keys, sizes = [f"f{i}" for i in range(num_files)], rng.randint(1, 5000, size=num_files)
    num_epochs = 2 * partition_epoch + 1
    settings_ = PlanSettings(num_shards=num_shards, partition_epoch=partition_epoch, num_epochs=num_epochs)
    node_cache = NodeCache(ranks_per_node=ranks_per_node, preload_next_n_sub_epochs=preload)
    fp = compute_cache_footprint(ShardPlan(keys, sizes, settings_), node_cache=node_cache, num_epochs=num_epochs)
    per_rank = _returnn_held_files(keys, sizes, settings_, preload=preload, num_epochs=num_epochs)
    size_of = dict(zip(keys, sizes.tolist()))
    for n in range(fp.num_nodes):
        ranks = node_cache.ranks_of(n, num_shards=num_shards)
        for e in range(1, num_epochs + 1):
            alive = set().union(*(per_rank[r][e - 1] for r in ranks))
            assert fp.held_files[e - 1, n] == len(alive)
            assert fp.held_bytes[e - 1, n] == sum(size_of[k] for k in alive)


def test_default_preload_is_returnns():
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
    from returnn.datasets.distrib_files import DistributeFilesDataset

    from tests.returnn_ranks import placeholder_sub_epoch_dataset

    def preload(**opts):
        return DistributeFilesDataset(
            files=["/nonexistent"], get_sub_epoch_dataset=placeholder_sub_epoch_dataset, **opts
        ).preload_next_n_sub_epochs

    assert preload() == DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS == 1
    assert preload(use_worker_proc=False) == 0


@settings(max_examples=examples(60))
@given(
    footprint_cases(),
    st.dictionaries(st.sampled_from(["const/a", "const/b", "const/c"]), st.integers(0, 500), min_size=1),
)
def test_files_the_sub_epoch_dataset_adds_to_every_sub_epoch_are_held_and_read(case, constant):
    plan, node_cache = case
    with_constant = NodeCache(
        ranks_per_node=node_cache.ranks_per_node,
        preload_next_n_sub_epochs=node_cache.preload_next_n_sub_epochs,
        cached_file=node_cache.cached_file,
        constant_bytes=sum(constant.values()),
    )
    num_epochs = plan.settings.num_epochs
    try:
        held, _, shared = brute_force(plan, node_cache, num_epochs, constant=constant)
    except ValueError as exc:  # a preload past num_epochs needs a seed beyond numpy's range: RETURNN fails too
        assert "takes seeds in [0, 2**32)" in str(exc)
        with pytest.raises(ValueError, match=r"RETURNN creates ahead \(preload_next_n_sub_epochs\) need full epoch"):
            compute_cache_footprint(plan, node_cache=with_constant, num_epochs=num_epochs)
        return
    fp = compute_cache_footprint(plan, node_cache=with_constant, num_epochs=num_epochs)
    assert fp.held_bytes.tolist() == held
    assert fp.shared_fs_bytes.tolist() == shared
