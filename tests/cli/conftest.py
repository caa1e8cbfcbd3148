"""Fixtures of the CLI tests."""

import numpy as np
import pytest

from i6_shard import core


@pytest.fixture
def sizes_file(tmp_path):
    """A sizes archive of 60 entries of random sizes: its path, keys and sizes."""
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(60)]
    sizes = np.random.RandomState(3).randint(1, 10**6, size=60)
    path = str(tmp_path / "file_sizes.npz")
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=sizes.astype(np.int64)), path)
    return path, keys, sizes


def plan_argv(sizes, out, *extra):
    """``plan`` of the sizes archive ``sizes`` on 2 shards with partition_epoch 2 into ``out``, then ``extra``."""
    return ["plan", "--sizes", str(sizes), "--num-shards", "2", "--partition-epoch", "2", "-o", str(out), *extra]
