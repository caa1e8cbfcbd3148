"""Tiny HDF files written with RETURNN's own SimpleHDFWriter, and a module-level
``get_sub_epoch_dataset`` for them (module-level so that it pickles into a RETURNN subprocess)."""

import os
from typing import Any, Dict, List, Sequence

import numpy as np


def hdf_sub_epoch_dataset(files: Sequence[str], *, seq_ordering: str = "random") -> Dict[str, Any]:
    """The sub-epoch dataset of a DistributeFilesDataset over HDF files."""
    return {"class": "HDFDataset", "files": list(files), "seq_ordering": seq_ordering}


def write_tiny_hdf_files(directory: str, *, num_files: int, seed: int = 0, max_seqs: int = 5) -> List[str]:
    """``num_files`` HDF files of 1..max_seqs short sequences each, tags ``file{i}/seq{j}``
    (unique across files); sizes vary with the number of sequences."""
    from returnn.datasets.hdf import SimpleHDFWriter

    os.makedirs(directory, exist_ok=True)
    rng = np.random.RandomState(seed)
    paths = []
    for i in range(num_files):
        path = os.path.join(directory, f"file{i:03d}.hdf")
        if os.path.exists(path):
            os.unlink(path)  # SimpleHDFWriter refuses to overwrite
        writer = SimpleHDFWriter(path, dim=2, ndim=2)
        for j in range(int(rng.randint(1, max_seqs + 1))):
            n = int(rng.randint(1, 4))
            writer.insert_batch(rng.rand(1, n, 2).astype("float32"), seq_len=[n], seq_tag=[f"file{i}/seq{j}"])
        writer.close()
        paths.append(path)
    return paths


def sharded_dfd(files, *, partition_epoch: int, sharding_fix=True, **extra) -> Dict[str, Any]:
    """A sharded DistributeFilesDataset dict over HDF files (in-process sub-epoch datasets, for speed)."""
    import functools

    d = {
        "class": "DistributeFilesDataset",
        "files": files,
        "get_sub_epoch_dataset": functools.partial(hdf_sub_epoch_dataset, seq_ordering="random"),
        "partition_epoch": partition_epoch,
        "seq_ordering": "random",
        "distrib_shard_files": True,
        "use_worker_proc": False,
    }
    if sharding_fix is not None:
        d["sharding_fix"] = sharding_fix
    d.update(extra)
    return d
