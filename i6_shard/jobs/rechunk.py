"""RechunkHdfJob: a RETURNN HDF corpus rewritten into files of even size, small enough for a plan to keep every
sub-epoch near the mean without dropping data, as a cached Sisyphus output."""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from sisyphus import Job, tk

from i6_shard import core
from i6_shard.core.io import check_regular_file, rechunk_hdf_corpus

from .util import RQMT_ARGS, PlainNumbersJobType, check_absolute_leaves, check_rqmt_args, instantiate, round_up
from .util import sized_task

__all__ = ["RechunkHdfJob"]

#: The request when the input cannot be measured (its list is not there yet when the manager asks).
_UNMEASURED_RQMT = {"cpu": 1, "mem": 4, "time": 2}


def rechunk_rqmt(*, total_bytes: int, largest_bytes: int, num_files: int) -> Dict[str, Union[int, float]]:
    """The request of a re-chunk of ``total_bytes`` of HDF files (the largest ``largest_bytes``) into ``num_files``
    files. Memory: 1 GB plus three output files (one is built in memory, written from its image, and read a run at a
    time); an output file holds at most ``total / num_files`` and one sequence, and a sequence is no larger than its
    input file. Time: a quarter of an hour plus the bytes at a pessimistic 20 MB/s (a slow network file system),
    at least half an hour.

    >>> rechunk_rqmt(total_bytes=100 * 10**9, largest_bytes=2 * 10**9, num_files=3200)
    {'cpu': 1, 'mem': 8, 'time': 1.75}
    """
    per_file = total_bytes / max(1, num_files) + largest_bytes
    hours = max(0.5, 0.25 + total_bytes / 20e6 / 3600)
    return {"cpu": 1, "mem": round_up(1 + 3 * per_file / 1e9, step=1), "time": round_up(hours, step=0.25)}


def _checked_args(args: Dict[str, Any]) -> Tuple[Optional[str], Dict[str, Union[int, float]]]:
    """Every argument checked (Sisyphus hashes before ``__init__`` runs, so ``hash`` calls this too): the list's
    extension (None for inline trees) and the resource requests given."""
    files = args["files"]
    if isinstance(files, tk.Path):
        ext = os.path.splitext(files.get_path())[1]
        if ext not in core.FILE_LIST_EXTENSIONS:
            raise ValueError(
                f"file list {files} has extension {ext!r}; give a {'/'.join(core.FILE_LIST_EXTENSIONS)} list of "
                "RETURNN HDF files"
            )
    elif isinstance(files, (list, tuple)) and files:
        core.pure.leaves_and_keys(instantiate(list(files)))  # checks the trees
        check_absolute_leaves(list(files), name="files")
        ext = None
    else:
        raise TypeError(
            f"files={files!r}: give a tk.Path to a .txt/.json/.py list of RETURNN HDF files, or a non-empty list of "
            "their paths (or file trees of them)"
        )
    core.pure.check_rechunk_args(
        num_shards=args["num_shards"],
        partition_epoch=args["partition_epoch"],
        num_files=args.get("num_files"),
        unit=args.get("unit", "frames"),
    )
    return ext, check_rqmt_args(**{name: args.get(name) for name in RQMT_ARGS})


class RechunkHdfJob(Job, metaclass=PlainNumbersJobType):
    """A RETURNN HDF corpus rewritten into files of even size (frames by default), every sequence whole and once,
    in the list's order, with its tag and every stream ``HDFDataset`` reads (see
    ``i6_shard.core.io.rechunk_hdf_corpus``). By default no file is above 5% of a rank's share of a sub-epoch
    (at least ``20 * num_shards * partition_epoch`` files, more where sequences are long against it), so that ``equal_steps`` drops nothing and keeps every sub-epoch
    within 10% of the mean; ``num_files`` overrides it.

    Outputs:
      - out_dir: the directory: ``data/part-NNNNN.hdf`` and the list;
      - out_file_list: the list, for ``ComputeFileCostsJob``/``ComputeFileSizesJob`` and the builders
        (``files.txt`` for a ``.txt`` input list, else ``files.json``).
    """

    def __init__(
        self,
        files: Union[tk.Path, Sequence[Any]],
        *,
        num_shards: int,
        partition_epoch: int,
        num_files: Optional[int] = None,
        unit: str = "frames",
        time_rqmt: Optional[float] = None,
        mem_rqmt: Optional[float] = None,
        cpu_rqmt: Optional[int] = None,
    ):
        """
        :param files: a tk.Path to a .txt/.json/.py list of RETURNN HDF files (or file trees of them, whose files
            hold the same tags in the same order), or a list of them (leaves: tk.Path or absolute str)
        :param num_shards: the training's ranks
        :param partition_epoch: sub-epochs per full epoch
        :param num_files: the number of files (default: enough that none is above 5% of a rank's share, at least
            ``20 * num_shards * partition_epoch``, at most one per sequence)
        :param unit: "frames" (the data stream's, as the plan's costs by frames) or "seqs"
        :param time_rqmt: hours (default: sized from the input's bytes, see :func:`rechunk_rqmt`); not hashed
        :param mem_rqmt: GB (default: sized from the input's bytes); not hashed
        :param cpu_rqmt: CPUs (default 1); not hashed
        """
        ext, self.given_rqmt = _checked_args(locals())
        self.files = files
        self.num_shards = num_shards
        self.partition_epoch = partition_epoch
        self.num_files = num_files
        self.unit = unit
        self.list_ext = ".txt" if ext == ".txt" else ".json"

        self.out_dir = self.output_path("rechunked", directory=True)
        self.out_file_list = self.output_path(f"rechunked/files{self.list_ext}")

    @classmethod
    def hash(cls, parsed_args):
        d = dict(parsed_args)
        _checked_args(d)  # Sisyphus hashes before __init__ runs: every check happens here
        for name in RQMT_ARGS:
            d.pop(name, None)
        return super().hash(d)

    def tasks(self):
        try:
            sized = self._sized_rqmt()
        except (OSError, ValueError, TypeError):  # the list is not there yet, or unreadable: run() says why
            sized = dict(_UNMEASURED_RQMT)
        yield sized_task("run", given=self.given_rqmt, sized=sized, mini=False)

    def run(self):
        made = rechunk_hdf_corpus(
            self._trees(),
            self.out_dir.get_path(),
            num_shards=self.num_shards,
            partition_epoch=self.partition_epoch,
            num_files=self.num_files,
            unit=self.unit,
            list_ext=self.list_ext,
        )
        print(f"{made.num_seqs} sequences in {len(made.costs)} files; largest {made.max_share:.3f} of a rank's share")

    def _trees(self) -> List[Any]:
        if isinstance(self.files, tk.Path):
            path = self.files.get_path()
            check_regular_file(path, what="file list")
            return core.read_file_list(path)
        return instantiate(list(self.files))

    def _sized_rqmt(self) -> Dict[str, Union[int, float]]:
        sizes = [os.path.getsize(leaf) for tree in self._trees() for leaf in core.pure.flatten(tree)]
        num_files = self.num_files or self.num_shards * self.partition_epoch * 20
        return rechunk_rqmt(total_bytes=sum(sizes), largest_bytes=max(sizes), num_files=math.ceil(num_files))
