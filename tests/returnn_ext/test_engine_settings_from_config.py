"""The RETURNN-side dataset reads the training's engine settings as RETURNN's torch engine does: ``batch_size_train``
before ``batch_size`` (``get_batching_iterable_dataset_from_config``), and a ``"node"`` sync level's groups from
torchrun's ranks per host (``LOCAL_WORLD_SIZE``), with a plan file (``plan=``, checked against the plan's recorded
settings) and without one (distribution "equal_steps" cutting from a costs archive)."""

import re

import pytest

from tests.deps import H5PY_REASON

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
pytest.importorskip("h5py", reason=H5PY_REASON)

from i6_shard import core  # noqa: E402
from i6_shard.core.io.plan_file import save_plan_arrays  # noqa: E402

from ..returnn_ranks import as_rank, dfd_files_per_epoch  # noqa: E402
from .test_equal_steps_dataset import _corpus, _dataset  # noqa: E402
from .test_plan_dataset import _plan_bins  # noqa: E402

_LEVELS = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 3}]}


def _plan(tmp_path, distribution="equal_steps", **engine):
    costs_path = _corpus(str(tmp_path), seed=5, num_files=24)
    request = core.PlanRequest.from_options(
        num_shards=4, partition_epoch=2, num_epochs=2, distribution=distribution, **engine
    )
    outputs = core.plan_archive(costs_path, request, compare=False)
    plan_path = str(tmp_path / "plan.npz")
    save_plan_arrays(outputs.arrays, plan_path)
    return core.load_file_sizes(costs_path).keys, plan_path, costs_path


@pytest.mark.slow
def test_batch_size_train_is_the_training_batch_size(tmp_path):
    """The torch engine batches the train data by batch_size_train where the config has it: a plan made for
    batch_size_train passes beside another batch_size, and a plan made for that batch_size is refused."""
    files, plan_path, _ = _plan(tmp_path, batch_size=100, max_seqs=3)
    with as_rank(0, 4, extra_config={"batch_size": 5000, "batch_size_train": 100, "max_seqs": 3}):
        _dataset(files, partition_epoch=2, plan=plan_path).init_seq_order(epoch=1)
    with as_rank(0, 4, extra_config={"batch_size": 100, "batch_size_train": 5000, "max_seqs": 3}):
        dataset = _dataset(files, partition_epoch=2, plan=plan_path)
        with pytest.raises(ValueError, match="simulated with batch_size=100, the config has batch_size=5000"):
            dataset.init_seq_order(epoch=1)


@pytest.mark.slow
def test_a_node_sync_level_is_cut_with_torchruns_ranks_per_node(tmp_path, monkeypatch):
    """Without a plan file, "equal_steps" under a node-level sync cuts what the plan made with the same ranks per
    node cuts; with the plan file, a training with other ranks per node is refused, naming both."""
    engine = {"batch_size": 100, "max_seqs": 3, "torch_distributed": _LEVELS}
    files, plan_path, costs_path = _plan(tmp_path, ranks_per_node=2, **engine)
    planned = _plan_bins(plan_path, num_epochs=2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    for rank in range(4):
        with as_rank(rank, 4, extra_config=engine):
            itself = _dataset(files, partition_epoch=2, distribution="equal_steps", file_sizes=costs_path)
            assert dfd_files_per_epoch(itself, num_epochs=2) == planned[rank], rank
            with_plan = _dataset(files, partition_epoch=2, plan=plan_path)
            assert dfd_files_per_epoch(with_plan, num_epochs=2) == planned[rank], rank
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    with as_rank(0, 4, extra_config=engine):
        dataset = _dataset(files, partition_epoch=2, plan=plan_path)
        with pytest.raises(ValueError, match="simulated with ranks_per_node=2 .* the training runs 4 ranks per node"):
            dataset.init_seq_order(epoch=1)


def test_a_plan_that_does_not_simulate_its_node_level_runs_with_any_ranks_per_node(tmp_path, monkeypatch):
    """A plan made under a node-level sync without ranks_per_node does not simulate that sync (its report says so,
    and predicts by the statistical model), so it records no ranks per node, and torchrun's are not refused."""
    engine = {"batch_size": 100, "max_seqs": 3, "torch_distributed": _LEVELS}
    files, plan_path, _ = _plan(tmp_path, distribution="balanced", **engine)
    assert "ranks_per_node" not in core.io.read_plan_head(plan_path).engine_settings
    planned = _plan_bins(plan_path, num_epochs=2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    with as_rank(1, 4, extra_config=engine):
        assert dfd_files_per_epoch(_dataset(files, partition_epoch=2, plan=plan_path), num_epochs=2) == planned[1]


def _hdf_sub_epoch(files, *, seq_ordering):
    return {"class": "HDFDataset", "files": list(files), "seq_ordering": seq_ordering}


@pytest.mark.parametrize(
    "order, refused",
    [
        pytest.param("laplace:.20", False, marks=pytest.mark.slow),
        ("random", True),
        pytest.param("sorted_reverse", True, marks=pytest.mark.slow),
    ],
)
def test_a_plan_simulated_with_another_sub_epoch_order_is_refused(tmp_path, order, refused):
    """The plan records the sub-epoch order it was simulated with (laplace here); the dataset reads its own from
    get_sub_epoch_dataset and refuses a plan of another, as the graph checks do, with the same words."""
    import functools

    engine = {"batch_size": 100, "max_seqs": 3}
    files, plan_path, _ = _plan(tmp_path, sub_epoch_seq_ordering="laplace:.20", **engine)
    assert core.io.read_plan_head(plan_path).engine_settings["sub_epoch_seq_ordering"] == "laplace:.20"
    with as_rank(0, 4, extra_config=engine):
        sub = functools.partial(_hdf_sub_epoch, seq_ordering=order)
        dataset = _dataset(files, partition_epoch=2, plan=plan_path, get_sub_epoch_dataset=sub)
        if refused:
            words = f"the sub-epoch dataset's seq_ordering='laplace:.20', the training's orders {order!r}"
            with pytest.raises(ValueError, match=re.escape(words)):
                dataset._check_plan()
        else:
            dataset._check_plan()


@pytest.mark.slow  # two equal_steps plans and each rank's own cut: 5 s of CPU (quick: test_equal_steps_dataset.py's)
def test_equal_steps_without_a_plan_file_cuts_with_the_sub_epoch_order(tmp_path):
    """Distribution "equal_steps" cut by the dataset itself takes its sub-epoch dataset's order (laplace here), as
    the plan made with that order does; the plan of the random order cuts other bins here, so the order is used."""
    import functools

    engine = {"batch_size": 100, "max_seqs": 3}
    files, plan_path, costs_path = _plan(tmp_path, sub_epoch_seq_ordering="laplace:.3", **engine)
    planned = _plan_bins(plan_path, num_epochs=2)
    request = core.PlanRequest.from_options(
        num_shards=4, partition_epoch=2, num_epochs=2, distribution="equal_steps", **engine
    )
    random_path = str(tmp_path / "random.npz")
    save_plan_arrays(core.plan_archive(costs_path, request, compare=False).arrays, random_path)
    assert _plan_bins(random_path, num_epochs=2) != planned
    sub = functools.partial(_hdf_sub_epoch, seq_ordering="laplace:.3")
    for rank in (0, 3):  # each rank cuts all bins (seconds each): the first and the last take theirs
        with as_rank(rank, 4, extra_config=engine):
            itself = _dataset(
                files, partition_epoch=2, distribution="equal_steps", file_sizes=costs_path, get_sub_epoch_dataset=sub
            )
            assert dfd_files_per_epoch(itself, num_epochs=2) == planned[rank], rank


def test_the_dataset_logs_the_plans_one_verdict_where_it_accepts_an_inexact_plan(tmp_path, capsys):
    """A plan made for a training whose DataLoader workers interleave (the reader's reason, engine_inexact) is
    accepted at start-up, and the dataset logs the plan's verdict, the words of its summary and report."""
    reason = "torch_dataloader_opts num_workers=2: the batches of 2 DataLoader workers interleave"
    files, plan_path, _ = _plan(tmp_path, distribution="balanced", batch_size=100, max_seqs=3, engine_inexact=(reason,))
    request = core.PlanRequest.from_options(
        num_shards=4,
        partition_epoch=2,
        num_epochs=2,
        distribution="balanced",
        batch_size=100,
        max_seqs=3,
        engine_inexact=(reason,),
    )
    with as_rank(0, 4, extra_config={"batch_size": 100, "max_seqs": 3}):
        _dataset(files, partition_epoch=2, plan=plan_path).init_seq_order(epoch=1)
    logged = capsys.readouterr().out
    assert f"its simulation of the engine is not exact ({request.inexact_reason()})" in logged, logged
