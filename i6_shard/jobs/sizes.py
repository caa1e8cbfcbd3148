"""ComputeFileSizesJob: the size of every entry of a DistributeFilesDataset file list, once,
as a cached Sisyphus output (split over parallel tasks for huge lists)."""

from __future__ import annotations

import math
import os
from typing import Any, List, Optional, Sequence, Union

import numpy as np
from sisyphus import Job, Task, gs, tk

from i6_shard import core

from .util import check_absolute_leaves, instantiate

__all__ = ["ComputeFileSizesJob"]


class ComputeFileSizesJob(Job):
    """Sizes of the entries of a file list, as RETURNN's DistributeFilesDataset computes them
    (the sum over each file tree's leaves), for ShardPlanJob and the i6_shard dataset.

    Outputs:
      - out_file_list: the list as RETURNN's DistributeFilesDataset reads it as ``files``
        (``files.txt`` when every entry is a plain file name, else ``files.json``);
      - out_file_sizes: ``file_sizes.npz`` (see ``i6_shard.core.save_file_sizes``).

    Small lists run as one mini task. Longer ones (more than ``ENTRIES_PER_TASK`` entries,
    or ``num_parallel_tasks`` > 1) are split over parallel ``run`` tasks, each writing its part
    atomically, and a ``merge`` task; a cluster engine then spreads the stat calls.
    """

    #: Entries per parallel task when ``num_parallel_tasks`` is None.
    ENTRIES_PER_TASK = 200_000
    #: Upper bound on the automatic number of parallel tasks.
    MAX_AUTO_TASKS = 64
    #: Requirements of a task that is not a mini task (stat calls wait on the file system, not the CPU).
    RQMT = {"cpu": 1, "mem": 2, "time": 1}

    def __init__(self, files: Union[Sequence[Any], tk.Path], *, num_threads: Optional[int] = None,
                 num_parallel_tasks: Optional[int] = None):
        """
        :param files: a list of file trees (leaves: tk.Path or str), or a tk.Path to a list
            file (.txt, .json or .py, as DistributeFilesDataset reads it; the scalable way)
        :param num_threads: stat threads per task (default ``core.io.DEFAULT_NUM_THREADS``); not hashed
        :param num_parallel_tasks: parallel tasks (None: one per ``ENTRIES_PER_TASK`` entries); not hashed
        """
        if isinstance(files, tk.Path):
            ext = os.path.splitext(files.get_path())[1]
            if ext not in core.FILE_LIST_EXTENSIONS:
                raise ValueError(f"file list {files} has extension {ext!r}; DistributeFilesDataset reads only "
                                 f"{', '.join(core.FILE_LIST_EXTENSIONS)}")
            txt = ext == ".txt"
        elif isinstance(files, (list, tuple)):
            if not files:
                raise ValueError("files=[] is empty: give the file trees of the dataset, or a tk.Path to its "
                                 "list file")
            plain = instantiate(list(files))
            core.pure.check_file_trees(plain)
            check_absolute_leaves(list(files), name="files")
            txt = not any(core.io.file_list.txt_entry_problem(f) for f in plain)
        else:
            hint = " (wrap a list file's path in tk.Path)" if isinstance(files, str) else ""
            raise TypeError(f"files must be a list of file trees or a tk.Path to a list file, got "
                            f"{type(files).__name__}{hint}")
        for name, value in (("num_threads", num_threads), ("num_parallel_tasks", num_parallel_tasks)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name}={value!r} must be a positive int or None")
        self.files = files
        self.num_threads = num_threads
        self.num_parallel_tasks = num_parallel_tasks

        self.out_file_list = self.output_path("files.txt" if txt else "files.json")
        self.out_file_sizes = self.output_path("file_sizes.npz")

    @classmethod
    def hash(cls, parsed_args):
        d = dict(parsed_args)
        del d["num_threads"], d["num_parallel_tasks"]
        return super().hash(d)

    # --- tasks -------------------------------------------------------------------------------

    def tasks(self):
        num_entries = self._num_entries()
        num_parts = self._num_parts(num_entries)
        if num_parts == 1:
            if num_entries <= self.ENTRIES_PER_TASK:
                yield Task("run", mini_task=True)
            else:
                yield Task("run", rqmt=self.RQMT)
        else:
            yield Task("run", rqmt=self.RQMT, args=range(num_parts))
            yield Task("merge", mini_task=True)

    def run(self, part: Optional[int] = None):
        trees = self._trees()
        if part is None:
            self._write_outputs(trees, self._collect(trees))
        else:
            self._compute_part(trees, part, self._num_parts(len(trees)))

    def merge(self):
        trees = self._trees()
        num_parts = self._num_parts(len(trees))
        keys, sizes = [], []
        for part in range(num_parts):
            if not os.path.exists(self._part_path(part, num_parts)):
                self._compute_part(trees, part, num_parts)  # e.g. num_parallel_tasks changed between runs
            fs = core.load_file_sizes(self._part_path(part, num_parts))
            keys += fs.keys
            sizes.append(fs.sizes)
        if keys != [core.tree_key(t) for t in trees]:
            raise RuntimeError(f"the parts in {self._work_dir()} do not add up to the file list; delete them and rerun")
        self._write_outputs(trees, core.FileSizes(keys=keys, sizes=np.concatenate(sizes).astype(np.int64)))

    # --- helpers -----------------------------------------------------------------------------

    def _trees(self) -> List[Any]:
        # Not cached on the job: the job object is pickled into its directory.
        if isinstance(self.files, tk.Path):
            return core.read_file_list(self.files.get_path())
        return instantiate(list(self.files))

    def _num_entries(self) -> int:
        """len(self._trees()); a .txt list is only counted (the manager calls this, for huge lists too)."""
        if isinstance(self.files, tk.Path) and self.files.get_path().endswith(".txt") \
                and os.path.isfile(self.files.get_path()):
            with open(self.files.get_path(), "rt") as f:  # the lines read_file_list keeps, one at a time
                return sum(1 for entry in map(str.strip, f) if entry and not entry.startswith("#"))
        return len(self._trees())

    def _collect(self, trees: List[Any]) -> core.FileSizes:
        try:
            return core.collect_file_sizes(trees, num_threads=self.num_threads)
        except core.MissingFilesError as exc:
            relative = [path for path, _ in exc.missing if not os.path.isabs(path)]
            if relative and isinstance(self.files, tk.Path):
                list_path = self.files.get_path()
                exc.args = (
                    f"{exc}\n{len(relative)} of the missing names are relative in the list file {list_path}: "
                    f"they were looked up in {os.getcwd()}, this job's work dir (Sisyphus runs tasks there). "
                    f"RETURNN does not resolve them against the list's directory {os.path.dirname(list_path)} "
                    "either, but against its own working dir. Write absolute paths into the list file.",)
            raise

    def _num_parts(self, num_entries: int) -> int:
        if self.num_parallel_tasks is not None:
            return self.num_parallel_tasks
        return max(1, min(self.MAX_AUTO_TASKS, math.ceil(num_entries / self.ENTRIES_PER_TASK)))

    def _work_dir(self) -> str:
        return self._sis_path(gs.JOB_WORK_DIR, abspath=True)  # tasks run with the job's work dir as cwd

    def _part_path(self, part: int, num_parts: int) -> str:
        return os.path.join(self._work_dir(), f"sizes.part-{part:04d}-of-{num_parts:04d}.npz")

    def _compute_part(self, trees: List[Any], part: int, num_parts: int) -> None:
        lo, hi = part * len(trees) // num_parts, (part + 1) * len(trees) // num_parts
        os.makedirs(self._work_dir(), exist_ok=True)
        sizes = self._collect(trees[lo:hi])
        core.save_file_sizes(sizes, self._part_path(part, num_parts))

    def _write_outputs(self, trees: List[Any], sizes: core.FileSizes) -> None:
        core.write_file_list(trees, self.out_file_list.get_path())
        core.save_file_sizes(sizes, self.out_file_sizes.get_path())
