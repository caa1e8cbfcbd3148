"""The engine simulation against RETURNN's own code on fuzzed inputs: the sequence order against
``Dataset.get_seq_order_for_epoch`` (directly, and through a DistributeFilesDataset's sub-epoch HDFDataset with the
seeds RETURNN derives sharded and unsharded), the batches against the torch engine's ``LenFilterDataPipe`` and
``BatchingIterDataPipe``, and the control syncs against ``DistributedContext.control_sync_levels``."""

import functools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from i6_shard.core.pure.engine_sim import (
    SyncLevel,
    _control_sync_levels,
    batch_bounds,
    length_filter,
    seq_order_for_epoch,
    sub_epoch_random_seed_offset,
    sub_epoch_seq_order,
    sync_levels_of,
)
from i6_shard.core.pure.settings import PlanSettings
from tests.deps import needs_torch
from tests.strategies import examples, sub_epoch_seq_orderings, torch_sync_setups

pytest.importorskip("returnn.datasets.basic", reason="parity tests need returnn: pip install returnn dm-tree h5py")

lengths_st = st.lists(st.integers(1, 40), min_size=1, max_size=60)


def _returnn_order(lengths, *, seq_ordering, epoch, random_seed_offset, fixed_random_seed):
    from returnn.datasets.basic import Dataset

    dataset = Dataset(
        seq_ordering=seq_ordering, random_seed_offset=random_seed_offset, fixed_random_seed=fixed_random_seed
    )
    lens = np.asarray(lengths)
    return [int(i) for i in dataset.get_seq_order_for_epoch(epoch, len(lens), get_seq_len=lambda i: int(lens[i]))]


@settings(max_examples=examples(400), deadline=None)
@given(
    lengths=lengths_st,
    seq_ordering=sub_epoch_seq_orderings,
    epoch=st.integers(1, 12),
    random_seed_offset=st.sampled_from([0, 1, 5, 16127, 3 * 16127 + 2]),
    fixed_random_seed=st.none() | st.integers(0, 99),
)
def test_seq_order_equals_returnn(lengths, seq_ordering, epoch, random_seed_offset, fixed_random_seed):
    got = seq_order_for_epoch(
        np.array(lengths),
        seq_ordering=seq_ordering,
        epoch=epoch,
        random_seed_offset=random_seed_offset,
        fixed_random_seed=fixed_random_seed,
    )
    assert got.tolist() == _returnn_order(
        lengths,
        seq_ordering=seq_ordering,
        epoch=epoch,
        random_seed_offset=random_seed_offset,
        fixed_random_seed=fixed_random_seed,
    )


NUM_FILES, NUM_SHARDS, PARTITION_EPOCH = 8, 2, 2


@pytest.fixture(scope="module")
def hdf_files(tmp_path_factory):
    """Files of 1..6 sequences of 1..30 frames: many equal lengths, so the stable sorts matter."""
    pytest.importorskip("h5py", reason="the HDF sub-datasets need h5py: pip install h5py")
    from tests.hdf_data import write_tiny_hdf_files

    return write_tiny_hdf_files(
        str(tmp_path_factory.mktemp("hdf")), num_files=NUM_FILES, seed=3, max_seqs=6, frames=(1, 30)
    )


def _file_lengths(path):
    from tests.training.harness import hdf_seq_lengths

    return hdf_seq_lengths(path)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    # sort_bin_shuffle with an empty bin gives float indices, which HDFDataset cannot read (a RETURNN limit; the
    # order itself is checked against get_seq_order_for_epoch above)
    seq_ordering=sub_epoch_seq_orderings.filter(lambda s: not s.startswith("sort_bin_shuffle")),
    distrib_shard_files=st.booleans(),
    config_offset=st.sampled_from([0, 7]),
)
def test_sub_epoch_order_equals_the_distribute_files_dataset(
    hdf_files, seq_ordering, distrib_shard_files, config_offset
):
    """Each rank's sub-epoch HDFDataset yields its files' sequences in the simulated order, with the seed offset
    RETURNN derives (sharded: the config's; unsharded: plus rank * 16127) and ``init_seq_order(full_epoch + 1)``."""
    from tests.hdf_data import file_index, hdf_sub_epoch_dataset, iterate_tags, seq_tag
    from tests.returnn_ranks import as_rank, new_dataset

    plan_settings = PlanSettings(
        num_shards=NUM_SHARDS,
        partition_epoch=PARTITION_EPOCH,
        distrib_shard_files=distrib_shard_files,
        random_seed_offset=config_offset,
    )
    lengths = {p: _file_lengths(p) for p in hdf_files}
    for rank in range(NUM_SHARDS):
        with as_rank(rank, NUM_SHARDS, dataset_random_seed_offset=config_offset):
            dfd = new_dataset(
                hdf_files,
                get_sub_epoch_dataset=functools.partial(hdf_sub_epoch_dataset, seq_ordering=seq_ordering),
                partition_epoch=PARTITION_EPOCH,
                seq_ordering="random",
                distrib_shard_files=distrib_shard_files,
                **({"sharding_fix": True} if distrib_shard_files else {}),
            )
            for epoch in (1, 2, 3):
                tags = iterate_tags(dfd, epoch)
                files = dfd._workers[epoch].dataset_dict["files"]
                seq_lens = np.concatenate([lengths[f] for f in files])
                flat = [seq_tag(int(os.path.basename(f)[4:7]), j) for f in files for j in range(len(lengths[f]))]
                assert sorted({file_index(t) for t in tags}) == sorted(int(os.path.basename(f)[4:7]) for f in files)
                order = sub_epoch_seq_order(
                    seq_lens,
                    seq_ordering=seq_ordering,
                    full_epoch_0idx=(epoch - 1) // PARTITION_EPOCH,
                    random_seed_offset=sub_epoch_random_seed_offset(plan_settings, shard_index=rank),
                )
                assert [flat[i] for i in order] == tags, (rank, epoch, seq_ordering)
            dfd.finish_epoch(free_resources=True)


def _returnn_batches(lengths2d, *, batch_size, max_seqs, min_seq_length, max_seq_length):
    """Sequence indices per batch from RETURNN's LenFilterDataPipe and BatchingIterDataPipe, as the torch engine
    chains them (two data keys of the given lengths)."""
    needs_torch("RETURNN's batching pipes are torch code")
    from returnn.torch.data.pipeline import BatchingIterDataPipe, LenFilterDataPipe

    seqs = [
        {"data": np.zeros((a, 1), "float32"), "classes": np.zeros((b,), "int32"), "seq_idx": np.array(i)}
        for i, (a, b) in enumerate(lengths2d)
    ]
    pipe = seqs
    if min_seq_length is not None or max_seq_length is not None:
        pipe = LenFilterDataPipe(pipe, min_seq_length=min_seq_length, max_seq_length=max_seq_length)
    pipe = BatchingIterDataPipe(pipe, batch_size=batch_size, max_seqs=max_seqs)
    return [[int(s["seq_idx"]) for s in batch] for batch in pipe]


@settings(max_examples=examples(300), deadline=None)
@given(
    lengths2d=st.lists(st.tuples(st.integers(1, 60), st.integers(1, 30)), min_size=1, max_size=80),
    batch_size=st.none() | st.integers(1, 300),
    max_seqs=st.none() | st.integers(1, 12),
    min_seq_length=st.none() | st.integers(1, 10),
    max_seq_length=st.none() | st.integers(5, 60),
)
def test_batches_equal_the_torch_engines(lengths2d, batch_size, max_seqs, min_seq_length, max_seq_length):
    if batch_size is None and max_seqs is None:
        max_seqs = 3
    x = np.array(lengths2d, dtype=np.int64)
    keep = np.flatnonzero(length_filter(x, min_seq_length=min_seq_length, max_seq_length=max_seq_length))
    bounds = batch_bounds(x[keep], batch_size=batch_size, max_seqs=max_seqs)
    got = [keep[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    assert got == _returnn_batches(
        lengths2d,
        batch_size=batch_size,
        max_seqs=max_seqs,
        min_seq_length=min_seq_length,
        max_seq_length=max_seq_length,
    )


def _returnn_sub_epoch_batches(files, *, epoch, random_seed_offset, batch_size, max_seqs, max_seq_length):
    """Batches of one rank's sub-epoch as the torch engine makes them from a real HDFDataset over ``files``: every
    data key it yields (``ReturnnDatasetIterDataPipe``), ``LenFilterDataPipe`` and ``BatchingIterDataPipe``."""
    needs_torch("RETURNN's batching pipes are torch code")
    from returnn.datasets.hdf import HDFDataset
    from returnn.torch.data.pipeline import BatchingIterDataPipe, LenFilterDataPipe
    from returnn.torch.data.returnn_dataset_wrapper import ReturnnDatasetIterDataPipe

    dataset = HDFDataset(files=list(files), seq_ordering="random", random_seed_offset=random_seed_offset)
    dataset.initialize()
    dataset.init_seq_order(epoch=epoch)
    pipe = ReturnnDatasetIterDataPipe(dataset, reset_callback=lambda: None, shard_workers=False)
    if max_seq_length is not None:
        pipe = LenFilterDataPipe(pipe, max_seq_length=max_seq_length)
    return [
        [str(s["seq_tag"]) for s in b] for b in BatchingIterDataPipe(pipe, batch_size=batch_size, max_seqs=max_seqs)
    ]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**16),
    batch_size=st.integers(30, 200),
    max_seqs=st.none() | st.integers(1, 6),
    max_seq_length=st.none() | st.integers(20, 45),
    cost_stream=st.sampled_from(["data", "classes"]),
)
@pytest.mark.slow
def test_a_plan_batches_by_the_longest_hdf_stream_as_the_torch_engine(
    tmp_path_factory, seed, batch_size, max_seqs, max_seq_length, cost_stream
):
    """HDF files whose target stream is longer than ``data`` for some sequences (and shorter for others): the plan's
    exact steps are the batches the torch engine makes of every key a real HDFDataset yields, length filter
    included, and the archive keeps the batching lengths beside the cost stream's."""
    pytest.importorskip("h5py", reason="the HDF files need h5py: pip install h5py")
    from i6_shard.core.io import collect_file_costs, load_file_costs, save_file_costs
    from i6_shard.core.planning import plan_archive
    from i6_shard.core.pure.plan_sim import rank_files
    from i6_shard.core.pure.request import PlanRequest
    from tests.hdf_data import write_tiny_hdf_files

    directory = str(tmp_path_factory.mktemp("targets"))
    paths = write_tiny_hdf_files(
        directory, num_files=NUM_FILES, seed=seed, max_seqs=6, frames=(1, 30), classes_frames=(1, 45)
    )
    archive = os.path.join(directory, "costs.npz")
    save_file_costs(collect_file_costs(paths, unit="frames", stream=cost_stream, num_procs=1), archive)
    costs = load_file_costs(archive)
    assert costs.batch_lengths == "hdf" and costs.seq_batch_lengths is not None
    num_epochs = 2 * PARTITION_EPOCH
    request = PlanRequest.from_options(
        num_shards=NUM_SHARDS,
        partition_epoch=PARTITION_EPOCH,
        num_epochs=num_epochs,
        batch_size=batch_size,
        max_seqs=max_seqs,
        max_seq_length=max_seq_length,
    )
    outputs = plan_archive(archive, request, compare=False)
    sim = outputs.ranks.simulation
    assert sim["exact"], sim["reason"]
    plan = outputs.plan

    def layout(k, r):
        return plan.layout(full_epoch_0idx=k, shard_index=r)

    for e in range(num_epochs):
        want = []
        for r in range(NUM_SHARDS):
            files = [paths[i] for i in rank_files(plan, layout, epoch_0idx=e, shard_index=r)]
            batches = _returnn_sub_epoch_batches(
                files,
                epoch=e // PARTITION_EPOCH + 1,
                random_seed_offset=sub_epoch_random_seed_offset(plan.settings, shard_index=r),
                batch_size=batch_size,
                max_seqs=max_seqs,
                max_seq_length=max_seq_length,
            )
            want.append(len(batches))
        assert sim["steps_exact"][e] == want, (e, sim["steps_exact"], want)
        assert sim["steps_taken"][e] == [min(want)] * NUM_SHARDS  # grad sync: every rank stops with the first


def _returnn_context(torch_distributed, *, num_ranks, ranks_per_node):
    """RETURNN's DistributedContext with the sync levels it parses, without a process group."""
    needs_torch("RETURNN's DistributedContext is torch code")
    from returnn.torch import distributed

    reduce_type, _ = sync_levels_of(torch_distributed)
    ctx = object.__new__(distributed.DistributedContext)
    hostnames = [f"host{r // ranks_per_node}" for r in range(num_ranks)] if ranks_per_node else None
    if reduce_type == "param":
        spec = [{"group": "world", "type": "param", "every": torch_distributed["param_sync_step"]}]
    elif reduce_type == "grad_explicit":
        spec = [{"group": "world", "type": "grad"}]
    else:
        spec = torch_distributed.get("sync", [])
    ctx._reduce_type = reduce_type
    ctx._sync_levels = distributed._parse_sync_levels(
        spec, size=num_ranks, local_size=ranks_per_node or num_ranks, hostnames=hostnames
    )
    ctx._world_level = distributed._parse_sync_levels(
        [{"group": "world", "type": "grad"}], size=num_ranks, local_size=num_ranks, hostnames=None
    )[0]
    return ctx


@settings(max_examples=examples(300), deadline=None)
@given(
    setup=torch_sync_setups(num_ranks=4),
    eupd=st.integers(0, 40),
    update_step=st.booleans(),
    world=st.booleans(),
    no_data=st.booleans(),
)
def test_control_sync_levels_equal_returnn(setup, eupd, update_step, world, no_data):
    torch_distributed, ranks_per_node = setup
    ctx = _returnn_context(torch_distributed, num_ranks=4, ranks_per_node=ranks_per_node)
    reduce_type, levels = sync_levels_of(torch_distributed)
    assert [(lv.sync_type, lv.every) for lv in ctx._sync_levels] == [(lv.sync_type, lv.every) for lv in levels]
    want = ctx.control_sync_levels(epoch_update_step_idx=eupd, update_step=update_step, world=world, no_data=no_data)
    got = _control_sync_levels(
        levels, reduce_type=reduce_type, eupd=eupd, update_step=update_step, world=world, no_data=no_data
    )
    all_levels = [ctx._world_level] + list(ctx._sync_levels)
    assert [all_levels.index(lv) for lv in want] == [0 if i is None else i + 1 for i in got]
    assert all(isinstance(lv, SyncLevel) for lv in levels)


_order_names = st.sampled_from(
    ["default", "reverse", "sorted", "sorted_reverse", "random", "random_sample", "laplace", "sort_bin_shuffle"]
    + ["sort_bin_shuffle_x2", "default_every_n", "shuffle", "Random", "laplace_x"]
)
_order_options = st.lists(
    st.sampled_from(["2", ".3", "x", ".x", "", "1", "-1", "0x1", " 4"]) | st.integers(1, 5).map(str), max_size=3
)


@settings(max_examples=examples(300), deadline=None)
@given(name=_order_names, options=_order_options)
def test_the_orders_refused_are_those_returnn_fails_on(name, options):
    """``check_sub_epoch_seq_ordering`` accepts exactly the ``seq_ordering`` strings on which RETURNN's
    ``get_seq_order_for_epoch`` does not raise (on sequences of several lengths, so every bin has some)."""
    from returnn.datasets.basic import Dataset

    from i6_shard.core.pure.engine_sim import check_sub_epoch_seq_ordering

    order = ":".join([name, *options])
    lens = np.arange(1, 41) % 7 + 1
    try:
        got = Dataset(seq_ordering=order).get_seq_order_for_epoch(1, len(lens), get_seq_len=lambda i: int(lens[i]))
        returnn_ok = len(got) > 0  # (default_every_n:-1 gives an empty order: no epoch to train either)
    except Exception:  # noqa: BLE001 (what RETURNN raises varies: ValueError, ZeroDivisionError, ...)
        returnn_ok = False
    try:
        check_sub_epoch_seq_ordering(order)
        ours = True
    except ValueError:
        ours = False
    assert ours == returnn_ok, order
