"""Real 2-rank trainings (torchrun, gloo, CPU): the torch engine reads the data in its DataLoader worker,
which RETURNN hands the behavior version only from 31. With behavior_version 26 and no sharding_fix the
sub-epoch dataset shards again there, and every rank reads about half of its files' sequences; the checks
flag that config when the graph is built, and pass it with behavior_version 31. (How param sync lets the ranks run
on to their next sync is shown on the trainings of test_engine_sim_live.py.)"""

import os
import re

import pytest

from tests.deps import needs_torch

from i6_shard.returnn_config import ConfigCheckError, check_returnn_config, sharded_files_dataset

from .harness import hdf_seq_lengths, run_training, training_config, write_skewed_hdf_files

NUM_FILES = 8


def _train():
    files = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]
    train = sharded_files_dataset(
        files,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=2,
        use_worker_proc=False,
        num_shards=2,
    )
    del train["sharding_fix"]  # RETURNN's default: on from behavior_version 26, where BehaviorVersion is set
    return train


def _read_shares(training, work_dir):
    """Per (epoch, rank): sequences the rank trained on / sequences of the files it drew."""
    seqs = {
        f"data/part{i:03d}.hdf": len(hdf_seq_lengths(os.path.join(work_dir, f"data/part{i:03d}.hdf")))
        for i in range(NUM_FILES)
    }
    out = {}
    for rank in range(2):
        text = training.log_text(rank)
        files = {
            int(m[1]): sum(seqs[k] for k in re.findall(r"'([^']+)'", m[2]))
            for m in re.finditer(r"using files for epoch (\d+): \[(.*)\]$", text, flags=re.M)
        }
        read = {}
        for m in re.finditer(r"^ep (\d+) train, step \d+, .*?num_seqs (\d+)", text, flags=re.M):
            read[int(m[1])] = read.get(int(m[1]), 0) + int(m[2])
        for epoch, num in files.items():
            out[(epoch, rank)] = read.get(epoch, 0) / num
    return out


@pytest.mark.parametrize("behavior_version, double_sharding", [(26, True), (31, False)])
def test_behavior_version_reaches_the_dataloader_worker_only_from_31(tmp_path, behavior_version, double_sharding):
    needs_torch("real trainings need torch")
    pytest.importorskip("returnn", reason="real trainings need RETURNN: pip install returnn dm-tree h5py")
    work_dir = str(tmp_path / "run")
    write_skewed_hdf_files(os.path.join(work_dir, "data"), num_files=NUM_FILES, seed=5)
    train = _train()
    config = training_config(train=train, num_epochs=2, behavior_version=behavior_version, batch_size=300, max_seqs=10)
    if double_sharding:
        with pytest.raises(ConfigCheckError, match="DataLoader worker.*behavior_version 26 does not apply"):
            check_returnn_config(config, num_ranks=2)
    else:
        check_returnn_config(config, num_ranks=2)
    training = run_training(
        work_dir, train=train, num_ranks=2, num_epochs=2, behavior_version=behavior_version, batch_size=300, max_seqs=10
    )
    shares = _read_shares(training, work_dir)
    assert sorted(shares) == [(e, r) for e in (1, 2) for r in (0, 1)]
    for epoch in (1, 2):
        # Grad sync stops every rank when the first runs out, and that one has read all it had:
        # all of its files' sequences, or only its half of them when the sub-epoch dataset shards again.
        first_out = max(shares[(epoch, r)] for r in (0, 1))
        if double_sharding:
            assert first_out < 0.7, shares
        else:
            assert first_out == 1.0, shares


def _per_rank(training, work_dir, num_files):
    """Per (epoch, rank): (steps, frames trained on, frames of the files it drew), from RETURNN's logs
    (``benchmarks/bench_sync_drop.py`` measures with it)."""
    frames = {
        f"data/part{i:03d}.hdf": int(hdf_seq_lengths(os.path.join(work_dir, f"data/part{i:03d}.hdf")).sum())
        for i in range(num_files)
    }
    out = {}
    for rank in range(training.num_ranks):
        text = training.log_text(rank)
        for m in re.finditer(r"using files for epoch (\d+): \[(.*)\]$", text, flags=re.M):
            out[(int(m[1]), rank)] = [0, 0, sum(frames[k] for k in re.findall(r"'([^']+)'", m[2]))]
        for m in re.finditer(r"^ep (\d+) train, step \d+, .*?sum_size:\S+ (\d+)", text, flags=re.M):
            out[(int(m[1]), rank)][0] += 1
            out[(int(m[1]), rank)][1] += int(m[2])
    return out
