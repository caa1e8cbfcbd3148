"""ComputeFileSizesJob: the size of every entry of a DistributeFilesDataset file list, once,
as a cached Sisyphus output (split over parallel tasks for huge lists)."""

from __future__ import annotations

import math
import os
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from sisyphus import Job, gs, tk

from i6_shard import core
from i6_shard.core.io import check_key_collisions, check_regular_file, file_list_digest, read_training_file_list

from i6_shard.returnn_config.reader import files_kind, read_files

from .util import (
    RQMT_ARGS,
    PlainNumbersJobType,
    check_absolute_leaves,
    check_picklable_functions,
    check_rqmt_args,
    instantiate,
    round_up,
    sized_task,
)

__all__ = ["ComputeFileSizesJob"]

#: Hex digits of the list digest in a part file's name.
_DIGEST_CHARS = 16
_PART_NAME = re.compile(r"^sizes\.part-(\d{4,})-of-(\d{4,})\.([0-9a-f]+)\.npz$")


def sizes_rqmt(*, num_entries: int, num_leaves: int, num_stat: int) -> Dict[str, Union[int, float]]:
    """The request of a task that reads a list of ``num_entries`` entries with ``num_leaves`` files in
    all (every task reads the whole list) and stats ``num_stat`` of the files. Memory: 1 GB plus 500
    bytes per entry and 1000 per file (measured on 100,000 entries: 380 bytes per entry of a .txt
    list, 1390 per two-file tree of a .json list). Time: a quarter of an hour, plus reading the
    list, plus the stat calls at a pessimistic 500 per second (a slow network file system; a local
    disk does 100 times more); at least half an hour.

    >>> sizes_rqmt(num_entries=10_000_000, num_leaves=10_000_000, num_stat=2_000_000)
    {'cpu': 1, 'mem': 16, 'time': 1.5}
    """
    mem_gb = 1 + (num_entries * 500 + num_leaves * 1000) / 1e9
    hours = max(0.5, 0.25 + num_entries * 20e-6 / 3600 + num_stat / 500 / 3600)
    return {"cpu": 1, "mem": round_up(mem_gb, step=1), "time": round_up(hours, step=0.25)}


def _checked_args(args: Dict[str, Any]) -> Tuple[bool, Optional[int], Optional[int], Dict[str, Union[int, float]]]:
    """Every argument checked (Sisyphus hashes them before ``__init__`` runs, so ``hash`` calls this
    too): whether out_file_list is a .txt list, the thread and task counts, the resource requests."""
    files = args["files"]
    if isinstance(files, tk.Path):
        ext = os.path.splitext(files.get_path())[1]
        if ext not in core.FILE_LIST_EXTENSIONS:
            raise ValueError(
                f"file list {files} has extension {ext!r}; DistributeFilesDataset reads only "
                f"{', '.join(core.FILE_LIST_EXTENSIONS)}"
            )
        txt = ext == ".txt"
    elif files_kind(files) == "callable":
        check_picklable_functions(files, where="files")
        txt = False  # the entries are known only when the task runs: a .json list holds any of them
    elif isinstance(files, (list, tuple)):
        if not files:
            raise ValueError("files=[] is empty: give the file trees of the dataset, or a tk.Path to its list file")
        plain = instantiate(list(files))
        leaves_and_keys = core.pure.leaves_and_keys(plain)  # checks the trees
        check_absolute_leaves(list(files), name="files")
        check_key_collisions(plain, where="files", leaves_and_keys_=leaves_and_keys)
        txt = not any(core.io.file_list.txt_entry_problem(f) for f in plain)
    else:
        hint = " (wrap a list file's path in tk.Path)" if isinstance(files, str) else ""
        raise TypeError(
            f"files must be a list of file trees, a tk.Path to a list file or a module-level function "
            f"(or functools.partial of one) returning the list, got "
            f"{type(files).__name__}{hint}"
        )
    num_threads = core.pure.check_optional_int(
        args.get("num_threads"), name="num_threads", minimum=1, hint="stat threads per task, or None"
    )
    num_parallel_tasks = core.pure.check_optional_int(
        args.get("num_parallel_tasks"),
        name="num_parallel_tasks",
        minimum=1,
        hint=f"or None: one per {ComputeFileSizesJob.ENTRIES_PER_TASK:,} entries",
    )
    given = check_rqmt_args(**{name: args.get(name) for name in RQMT_ARGS})
    return txt, num_threads, num_parallel_tasks, given


class ComputeFileSizesJob(Job, metaclass=PlainNumbersJobType):
    """Sizes of the entries of a file list, as RETURNN's DistributeFilesDataset computes them
    (the sum over each file tree's leaves), for ShardPlanJob and the i6_shard dataset.

    Outputs:
      - out_file_list: the list as RETURNN's DistributeFilesDataset reads it as ``files``
        (``files.txt`` when every entry is a plain file name, else ``files.json``; always
        ``files.json`` for a callable, whose entries are known only when the task runs);
      - out_file_sizes: ``file_sizes.npz`` (see ``i6_shard.core.save_file_sizes``).

    Small lists run as one mini task. Longer ones (more than ``ENTRIES_PER_TASK`` entries,
    or ``num_parallel_tasks`` > 1) are split over parallel ``run`` tasks, each writing its part
    atomically under a digest of the list, and a ``merge`` task, which refuses parts of another
    version of the list; a cluster engine then spreads the stat calls. Entries that share
    RETURNN's file key but not their files (``"a:b"`` and ``("a", "b")``) are an error: RETURNN
    would give them one size between them.
    """

    #: Entries per parallel task when ``num_parallel_tasks`` is None; a list up to this long runs as one mini task.
    ENTRIES_PER_TASK = 200_000
    #: Upper bound on the automatic number of parallel tasks.
    MAX_AUTO_TASKS = 64

    def __init__(
        self,
        files: Union[Sequence[Any], tk.Path, Callable[[], List[Any]]],
        *,
        num_threads: Optional[int] = None,
        num_parallel_tasks: Optional[int] = None,
        time_rqmt: Optional[float] = None,
        mem_rqmt: Optional[float] = None,
        cpu_rqmt: Optional[int] = None,
    ):
        """
        :param files: a list of file trees (leaves: tk.Path or str), or a tk.Path to a list
            file (.txt, .json or .py, as DistributeFilesDataset reads it; the scalable way), or a
            module-level function (or ``functools.partial`` of one) that returns the list, as RETURNN
            takes it: hashed by name and arguments, called only in the task (never by the manager),
            for lists that exist only when the job runs
        :param num_threads: stat threads per task (default ``core.io.DEFAULT_NUM_THREADS``); not hashed
        :param num_parallel_tasks: parallel tasks (None: one per ``ENTRIES_PER_TASK`` entries); not hashed
        :param time_rqmt: hours per task (default: sized from the entries, see :func:`sizes_rqmt`; up to
            ``ENTRIES_PER_TASK`` entries run as a mini task unless a request is given); not hashed
        :param mem_rqmt: GB per task (default: sized from the entries); not hashed
        :param cpu_rqmt: CPUs per task (default 1); not hashed
        """
        txt, self.num_threads, self.num_parallel_tasks, self.given_rqmt = _checked_args(
            dict(
                files=files,
                num_threads=num_threads,
                num_parallel_tasks=num_parallel_tasks,
                time_rqmt=time_rqmt,
                mem_rqmt=mem_rqmt,
                cpu_rqmt=cpu_rqmt,
            )
        )
        self.files = files

        self.out_file_list = self.output_path("files.txt" if txt else "files.json")
        self.out_file_sizes = self.output_path("file_sizes.npz")

    @classmethod
    def hash(cls, parsed_args):
        d = dict(parsed_args)
        _checked_args(d)  # Sisyphus hashes before __init__ runs: every check happens here
        for name in ("num_threads", "num_parallel_tasks", *RQMT_ARGS):
            d.pop(name, None)
        return super().hash(d)

    # --- tasks -------------------------------------------------------------------------------

    def tasks(self):
        if self._is_callable():
            # The list exists only when the task runs: one task, sized for a large list; the manager never calls it.
            sized = sizes_rqmt(
                num_entries=self.ENTRIES_PER_TASK, num_leaves=self.ENTRIES_PER_TASK, num_stat=self.ENTRIES_PER_TASK
            )
            yield sized_task("run", given=self.given_rqmt, sized=sized, mini=False)
            return
        try:
            num_entries, num_leaves = self._count()
        except (OSError, ValueError, TypeError):
            # A list that cannot be counted (not a regular file, unreadable, unparsable): one task, whose
            # run says why. Raising here would stop the manager, and every other job of the graph with it.
            yield sized_task("run", given=self.given_rqmt, sized={"cpu": 1, "mem": 1, "time": 0.5}, mini=True)
            return
        num_parts = self._num_parts(num_entries)
        small = num_entries <= self.ENTRIES_PER_TASK
        whole = sizes_rqmt(num_entries=num_entries, num_leaves=num_leaves, num_stat=num_leaves)
        if num_parts == 1:
            yield sized_task("run", given=self.given_rqmt, sized=whole, mini=small)
        else:
            part = sizes_rqmt(
                num_entries=num_entries, num_leaves=num_leaves, num_stat=math.ceil(num_leaves / num_parts)
            )
            yield sized_task("run", given=self.given_rqmt, sized=part, mini=False, args=range(num_parts))
            # the merge may have to compute parts that are missing
            yield sized_task("merge", given=self.given_rqmt, sized=whole, mini=small)

    def run(self, part: Optional[int] = None):
        trees = self._trees()
        if part is None:
            self._write_outputs(trees, self._collect(trees))
        else:
            self._compute_part(trees, part, self._num_parts(len(trees)), file_list_digest(trees))

    def merge(self):
        trees = self._trees()
        num_parts = self._num_parts(len(trees))
        digest = file_list_digest(trees)
        self._check_no_stale_parts(num_parts, digest)
        parts = []
        for part in range(num_parts):
            path = self._part_path(part, num_parts, digest)
            if not os.path.exists(path):
                self._compute_part(trees, part, num_parts, digest)  # e.g. num_parallel_tasks changed between runs
            parts.append(core.load_file_sizes(path))
            lo, hi = self._part_range(part, num_parts, len(trees))
            if len(parts[-1]) != hi - lo:
                raise RuntimeError(
                    f"part {part} of {num_parts} ({path}) holds {len(parts[-1])} sizes for entries "
                    f"{lo}..{hi - 1} ({hi - lo}); delete it and rerun the merge"
                )
        merged = core.FileSizes.concatenate(parts)
        if merged.keys != [core.tree_key(t) for t in trees]:  # the digest makes this an internal check
            raise RuntimeError(f"the parts in {self._work_dir()} do not add up to the file list; delete them and rerun")
        self._write_outputs(trees, merged)

    # --- helpers -----------------------------------------------------------------------------

    def _list_path(self) -> Optional[str]:
        return self.files.get_path() if isinstance(self.files, tk.Path) else None

    def _is_callable(self) -> bool:
        return not isinstance(self.files, (list, tuple, tk.Path))

    def _trees(self) -> List[Any]:
        """The entries, checked: a list file must be a regular file (stat-ed before it is opened),
        hold at least one entry, and no two entries may share RETURNN's key but not their files."""
        # Not cached on the job: the job object is pickled into its directory.
        if self._is_callable():
            trees = read_files(instantiate(self.files))
            if not trees:
                raise ValueError(
                    f"files={self.files!r} returned an empty list; DistributeFilesDataset needs at least one file"
                )
            core.pure.leaves_and_keys(trees)  # checks the trees, naming a bad entry
            check_key_collisions(trees, where=f"the list returned by files={self.files!r}")
            return trees
        list_path = self._list_path()
        if list_path is None:
            return instantiate(list(self.files))  # checked when the graph was built
        return read_training_file_list(list_path)

    def _count(self) -> Tuple[int, int]:
        """The number of entries and of files (leaves) in all. A .txt list is only counted, line by
        line (the manager calls this, for huge lists too). A list file is stat-ed before it is opened:
        one that is not a regular file (a FIFO would block the manager) is an error naming it."""
        list_path = self._list_path()
        if list_path is not None:
            check_regular_file(list_path, what="file list")
        if list_path is not None and list_path.endswith(".txt"):
            # the lines read_file_list keeps, one at a time; undecodable ones are its error to report
            with open(list_path, "rt", errors="surrogateescape") as f:
                num_entries = sum(1 for entry in map(str.strip, f) if entry and not entry.startswith("#"))
            return num_entries, num_entries
        trees = instantiate(list(self.files)) if list_path is None else core.read_file_list(list_path)
        leaves, _ = core.pure.leaves_and_keys(trees)
        return len(trees), sum(map(len, leaves))

    def _collect(self, trees: List[Any]) -> core.FileSizes:
        try:
            return core.collect_file_sizes(trees, num_threads=self.num_threads)
        except core.MissingFilesError as exc:
            relative = [path for path, _ in exc.missing if not os.path.isabs(path)]
            list_path = self._list_path()
            if relative and list_path is not None:
                exc.args = (
                    f"{exc}\n{len(relative)} of the missing names are relative in the list file {list_path}: "
                    f"they were looked up in {os.getcwd()}, this job's work dir (Sisyphus runs tasks there). "
                    f"RETURNN does not resolve them against the list's directory {os.path.dirname(list_path)} "
                    "either, but against its own working dir. Write absolute paths into the list file.",
                )
            raise

    def _num_parts(self, num_entries: int) -> int:
        if self.num_parallel_tasks is not None:
            return self.num_parallel_tasks
        return max(1, min(self.MAX_AUTO_TASKS, math.ceil(num_entries / self.ENTRIES_PER_TASK)))

    @staticmethod
    def _part_range(part: int, num_parts: int, num_entries: int) -> Tuple[int, int]:
        return part * num_entries // num_parts, (part + 1) * num_entries // num_parts

    def _work_dir(self) -> str:
        return self._sis_path(gs.JOB_WORK_DIR, abspath=True)  # tasks run with the job's work dir as cwd

    def _part_path(self, part: int, num_parts: int, digest: str) -> str:
        """A part's file, named by its index, the number of parts and the digest of the list it came from."""
        return os.path.join(self._work_dir(), f"sizes.part-{part:04d}-of-{num_parts:04d}.{digest[:_DIGEST_CHARS]}.npz")

    def _check_no_stale_parts(self, num_parts: int, digest: str) -> None:
        """Refuse to go on where a part exists only as computed from another version of the list (even
        if the counts add up): the list changed while the job ran. A part of the list as it is is used."""
        work = self._work_dir()
        found: Dict[int, set] = {}
        for name in os.listdir(work) if os.path.isdir(work) else []:
            match = _PART_NAME.match(name)
            if match and int(match.group(2)) == num_parts:
                found.setdefault(int(match.group(1)), set()).add(match.group(3))
        current = digest[:_DIGEST_CHARS]
        stale = sorted(part for part, digests in found.items() if current not in digests)
        if stale:
            where = f"file list {self._list_path()}" if self._list_path() else "file list"
            listed = ", ".join(
                f"part {part} ({os.path.basename(self._part_path(part, num_parts, d))})"
                for part in stale[:5]
                for d in sorted(found[part])
            )
            raise RuntimeError(
                f"{len(stale)} of the {num_parts} parts in {work} were computed from another version of the {where} "
                f"(its entries' digest is now {current}): {listed}{', ...' if len(stale) > 5 else ''}. "
                "The list changed while this job ran, but a Sisyphus job's inputs must stay as they were: restore "
                "the list, or delete these part files and rerun the merge to compute the sizes of the list as it "
                "is now."
            )

    def _compute_part(self, trees: List[Any], part: int, num_parts: int, digest: str) -> None:
        lo, hi = self._part_range(part, num_parts, len(trees))
        os.makedirs(self._work_dir(), exist_ok=True)
        try:
            sizes = self._collect(trees[lo:hi])
        except core.MissingFilesError as exc:  # name the part and its entries in the whole list
            exc.args = (
                f"part {part} of {num_parts} (task run.{part + 1}, entries {lo}..{hi - 1} of {len(trees)}): {exc}",
            )
            raise
        core.save_file_sizes(sizes, self._part_path(part, num_parts, digest))

    def _write_outputs(self, trees: List[Any], sizes: core.FileSizes) -> None:
        core.write_file_list(trees, self.out_file_list.get_path())
        core.save_file_sizes(sizes, self.out_file_sizes.get_path())
