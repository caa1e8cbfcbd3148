"""The training harness runs a real 2-rank RETURNN training: every rank's own log shows the files it
was given in every sub-epoch (sharded: disjoint per sub-epoch, each file once per full epoch) and
its trained steps; the torchrun stdout carries both ranks' lines with their prefixes."""

import os
import re

import pytest

from .conftest import SHARED
from .harness import hdf_seq_lengths, run_training


def test_every_rank_read_files_in_every_sub_epoch(two_rank_training):
    t = two_rank_training
    assert [os.path.basename(p) for p in t.log_files] == [
        "returnn.torch-distrib-0-2.log",
        "returnn.torch-distrib-1-2.log",
    ]
    files = {}  # (epoch, rank) -> files
    for rank in range(2):
        text = t.log_text(rank)
        for epoch in range(1, SHARED["num_epochs"] + 1):
            line = re.search(
                rf"^<DistributeFilesDataset 'train' epoch=\d+>: using files for epoch {epoch}: "
                rf"\[(.*)\]$",
                text,
                flags=re.M,
            )
            assert line, f"rank {rank} logged no files for epoch {epoch}"
            files[(epoch, rank)] = re.findall(r"'([^']+)'", line.group(1))
            assert files[(epoch, rank)], (epoch, rank)
            steps = int(re.search(rf"^Epoch {epoch}: Trained (\d+) steps", text, flags=re.M).group(1))
            assert steps > 0
            assert len(re.findall(rf"^ep {epoch} train, step \d+, .*sum_size:\S+ \d+", text, flags=re.M)) == steps
    everything = [f"data/part{i:03d}.hdf" for i in range(SHARED["num_files"])]
    for first in range(1, SHARED["num_epochs"] + 1, SHARED["partition_epoch"]):
        full = [f for e in range(first, first + SHARED["partition_epoch"]) for r in range(2) for f in files[(e, r)]]
        assert sorted(full) == everything  # each file exactly once per full epoch, over ranks and sub-epochs
    for name in everything:
        assert len(hdf_seq_lengths(os.path.join(t.work_dir, name))) >= 1
    out = t.stdout
    assert "[default0]:" in out and "[default1]:" in out


def test_a_directory_with_logs_is_not_reused(two_rank_training):
    with pytest.raises(ValueError, match="already holds RETURNN logs"):
        run_training(two_rank_training.work_dir, train={}, num_ranks=2, num_epochs=1)
