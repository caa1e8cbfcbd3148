"""One real 2-rank RETURNN training (torchrun, gloo, CPU) per test session, shared by the tests here."""

import pytest

from tests.deps import needs_torch

from .harness import run_sharded_training

#: Settings of the shared training: skewed HDF data, frames-based batching, behavior_version 33 (the logged
#: 'complete' is the mean over the ranks). The DFD worker process is off here: it doubles the time on two
#: cores; the committed logs in tests/data/returnn_logs cover it. The DataLoader reads in each rank's process
#: (num_workers=0): its worker per rank cost a third of the training's CPU; test_engine_live.py reads through it.
SHARED = dict(
    num_ranks=2,
    num_files=16,
    seed=11,
    partition_epoch=2,
    num_epochs=4,
    behavior_version=33,
    use_worker_proc=False,
    batch_size=300,
    max_seqs=10,
    extra_config={"torch_dataloader_opts": {"num_workers": 0}},
)


@pytest.fixture(scope="session")
def two_rank_training(tmp_path_factory):
    """The finished training (see :data:`SHARED`); skipped without torch."""
    needs_torch("real trainings need torch")
    pytest.importorskip("returnn", reason="real trainings need RETURNN: pip install returnn dm-tree h5py")
    return run_sharded_training(str(tmp_path_factory.mktemp("two_rank") / "run"), **SHARED)
