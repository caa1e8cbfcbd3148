"""Tiny HDF files for the config-builder tests, written with RETURNN's SimpleHDFWriter;
sequence tags are ``"<file index>/<seq index>"`` so a tag tells which file it came from."""

import os
from typing import List, Optional, Sequence

import numpy as np


def write_hdf_files(directory: str, *, num_files: int, seed: int = 0,
                    names: Optional[Sequence[str]] = None) -> List[str]:
    """``num_files`` HDF files with 1..4 sequences of 1..3 frames each (so sizes differ)."""
    from returnn.datasets.hdf import SimpleHDFWriter

    os.makedirs(directory, exist_ok=True)
    rng = np.random.RandomState(seed)
    paths = []
    for i in range(num_files):
        name = names[i] if names is not None and i < len(names) else f"part{i:02d}.hdf"
        path = os.path.join(directory, name)
        writer = SimpleHDFWriter(path, dim=2, ndim=2)
        for j in range(int(rng.randint(1, 5))):
            n = int(rng.randint(1, 4))
            writer.insert_batch(rng.rand(1, n, 2).astype("float32"), seq_len=[n], seq_tag=[f"{i}/{j}"])
        writer.close()
        paths.append(path)
    return paths


def iterate_tags(dataset, epoch: int) -> List[str]:
    """All sequence tags of one sub-epoch of an initialized RETURNN dataset, in order."""
    dataset.init_seq_order(epoch=epoch)
    tags = []
    seq_idx = 0
    while dataset.is_less_than_num_seqs(seq_idx):
        dataset.load_seqs(seq_idx, seq_idx + 1)
        tags.append(dataset.get_tag(seq_idx))
        seq_idx += 1
    return tags
