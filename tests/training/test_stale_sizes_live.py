"""A real 2-rank RETURNN training (torchrun, gloo, CPU) whose precomputed file sizes went stale
stops at start-up on every rank that samples the changed file, naming it, before any step."""

import os
import re

import pytest

from tests.deps import needs_torch

from .harness import run_training, write_skewed_hdf_files


def test_a_file_resized_after_the_sizes_were_computed_stops_the_training(tmp_path):
    needs_torch("real trainings need torch")
    pytest.importorskip("returnn", reason="real trainings need RETURNN: pip install returnn dm-tree h5py")
    from i6_shard import core
    from i6_shard.returnn_config import sharded_files_dataset

    work_dir = str(tmp_path / "run")
    files = write_skewed_hdf_files(os.path.join(work_dir, "data"), num_files=8, seed=3)
    sizes_path = str(tmp_path / "file_sizes.npz")
    core.save_file_sizes(core.collect_file_sizes(files, num_threads=1, num_procs=1), sizes_path)
    with open(files[2], "ab") as f:  # e.g. a file rewritten by a preprocessing job after the sizes job ran
        f.write(b"\0" * 4096)
    train = sharded_files_dataset(
        files,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=2,
        distribution="balanced",
        file_sizes=sizes_path,
        num_shards=2,
        extra_opts={"file_sizes_check_samples": len(files)},
    )  # every rank checks all
    with pytest.raises(RuntimeError, match="failed with exit code") as info:
        run_training(work_dir, train=train, num_ranks=2, num_epochs=2)
    out = open(os.path.join(work_dir, "stdout.txt"), encoding="utf-8", errors="replace").read()
    for rank in (0, 1):
        line = re.search(
            rf"^\[default{rank}\]:.*StaleFileSizesError: file_sizes {re.escape(repr(sizes_path))} is "
            rf"stale: 1 of 8 sampled entries changed .*entry 2 {re.escape(repr(files[2]))}: ",
            out,
            re.M,
        )
        assert line, f"rank {rank} did not name the changed file:\n{str(info.value)[-3000:]}"
    assert not re.search(r"^\[default\d\]:ep 1 train, step", out, re.M), "a step ran on stale sizes"
