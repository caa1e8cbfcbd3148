"""The tests' one writer of HDF files (RETURNN's own SimpleHDFWriter), the tags it writes, and
module-level dataset helpers for them (module-level so that they pickle into a RETURNN subprocess)."""

import functools
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np


def hdf_sub_epoch_dataset(files: Sequence[str], *, seq_ordering: str = "random") -> Dict[str, Any]:
    """The sub-epoch dataset of a DistributeFilesDataset over HDF files."""
    return {"class": "HDFDataset", "files": list(files), "seq_ordering": seq_ordering}


def multi_proc_sub_epoch_dataset(files: Sequence[str], *, sharding_method: str = "seq_order") -> Dict[str, Any]:
    """A MultiProcDataset (2 workers) around the HDF sub-epoch dataset, as the sub-epoch dataset."""
    return {
        "class": "MultiProcDataset",
        "num_workers": 2,
        "buffer_size": 5,
        "sharding_method": sharding_method,
        "dataset": hdf_sub_epoch_dataset(files),
    }


def seq_tag(file_idx: int, seq_idx: int) -> str:
    """The tag of sequence ``seq_idx`` in file ``file_idx``: unique across files, and it names its file."""
    return f"file{file_idx}/seq{seq_idx}"


def file_index(tag: str) -> int:
    """The index of the file a :func:`seq_tag` came from.

    >>> file_index(seq_tag(12, 3))
    12
    """
    head = tag.split("/", 1)[0]
    if not head.startswith("file"):
        raise ValueError(f"tag {tag!r} was not written by write_tiny_hdf_files (expected file<i>/seq<j>)")
    return int(head[len("file") :])


def write_hdf_file(
    path: str, features: Sequence[np.ndarray], *, tags: Sequence[str], classes: Optional[Sequence[np.ndarray]] = None
) -> str:
    """One RETURNN HDF file (RETURNN's SimpleHDFWriter), one sequence per ``[frames, dim]`` array of
    ``features``, tagged ``tags``, with a sparse target stream ``"classes"`` of one int array per sequence where
    given (its own lengths); the one HDF writer of the tests. Written under a temporary name and
    renamed, so a file of that name is replaced whole (SimpleHDFWriter refuses to overwrite)."""
    from returnn.datasets.hdf import SimpleHDFWriter

    if len(features) != len(tags) or not features:
        raise ValueError(
            f"{len(features)} sequences and {len(tags)} tags for {path}: give one tag per sequence, and at least one"
        )
    tmp = path + ".tmp.hdf"
    if os.path.exists(tmp):
        os.unlink(tmp)
    extra_type = None if classes is None else {"classes": (10, 1, "int32")}
    writer = SimpleHDFWriter(tmp, dim=int(features[0].shape[1]), ndim=2, extra_type=extra_type)
    for i, (feats, tag) in enumerate(zip(features, tags)):
        extra = None if classes is None else {"classes": np.asarray(classes[i], dtype="int32")[None]}
        writer.insert_batch(np.asarray(feats, dtype="float32")[None], seq_len=[len(feats)], seq_tag=[tag], extra=extra)
    writer.close()
    os.replace(tmp, path)
    return path


def write_tiny_hdf_files(
    directory: str,
    *,
    num_files: int,
    seed: int = 0,
    max_seqs: int = 5,
    seqs_per_file: Optional[Sequence[int]] = None,
    frames: Tuple[int, int] = (1, 3),
    dim: int = 2,
    names: Optional[Sequence[str]] = None,
    classes_frames: Optional[Tuple[int, int]] = None,
) -> List[str]:
    """Write ``num_files`` HDF files into ``directory`` and return their paths, in file order.

    File ``i`` is ``names[i]`` (default ``file{i:03d}.hdf``) and holds ``seqs_per_file[i]``
    sequences (default: 1..max_seqs, drawn from ``seed``), each of ``frames[0]..frames[1]``
    frames of ``dim`` random float32 features, tagged :func:`seq_tag` ``(i, j)``, and with ``classes_frames`` a
    ``"classes"`` target of ``classes_frames[0]..classes_frames[1]`` labels (drawn after the file's features). The same
    arguments give the same files, so sizes (and tags) vary only with the draws. An existing
    file of the same name is replaced.
    """
    if names is not None and len(names) != num_files:
        raise ValueError(f"{len(names)} names for num_files={num_files}: give one name per file")
    if seqs_per_file is not None and len(seqs_per_file) != num_files:
        raise ValueError(f"{len(seqs_per_file)} seqs_per_file for num_files={num_files}: give one count per file")
    os.makedirs(directory, exist_ok=True)
    rng = np.random.RandomState(seed)
    paths = []
    for i in range(num_files):
        path = os.path.join(directory, names[i] if names is not None else f"file{i:03d}.hdf")
        num_seqs = int(rng.randint(1, max_seqs + 1)) if seqs_per_file is None else int(seqs_per_file[i])
        features = [rng.rand(int(rng.randint(frames[0], frames[1] + 1)), dim) for _ in range(num_seqs)]
        classes = None
        if classes_frames is not None:
            classes = [rng.randint(0, 10, size=rng.randint(classes_frames[0], classes_frames[1] + 1)) for _ in features]
        paths.append(write_hdf_file(path, features, tags=[seq_tag(i, j) for j in range(num_seqs)], classes=classes))
    return paths


def iterate_tags(dataset, epoch: int) -> List[str]:
    """All sequence tags of one sub-epoch of an initialized RETURNN dataset, in order."""
    dataset.init_seq_order(epoch=epoch)
    tags = []
    seq_idx = 0
    while dataset.is_less_than_num_seqs(seq_idx):
        dataset.load_seqs(seq_idx, seq_idx + 1)
        tags.append(str(dataset.get_tag(seq_idx)))
        seq_idx += 1
    return tags


def sharded_dfd(files, *, partition_epoch: int, sharding_fix=True, **extra) -> Dict[str, Any]:
    """A sharded DistributeFilesDataset dict over HDF files (in-process sub-epoch datasets, for speed)."""
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
