"""The stat engine: the sizes of a file list's entries as RETURNN's DistributeFilesDataset computes them, every
leaf stat-ed once, in threads or in helper processes (stat_child.py) depending on how the file system answers;
every missing or unreadable file reported at once."""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import stat as stat_mod
import subprocess
import sys
import threading
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..pure.file_tree import MAX_TREE_DEPTH, FileTree, leaves_and_keys, tree_depth
from . import stat_child
from .file_sizes import FileSizes
from ..pure.text import short_repr
from .progress import Progress
from .stat_child import FAILED_RECORD, RECORD_INTS, stat_records

__all__ = ["collect_file_sizes", "MissingFilesError", "DEFAULT_NUM_THREADS"]

DEFAULT_NUM_THREADS = 32
_MAX_LISTED_MISSING = 20
# Codes in the size array for leaves that stat-ed but cannot be read as data files.
_STAT_FAILED, _NOT_REGULAR, _UNREADABLE = FAILED_RECORD[0], -2, -3
_FILE_TYPES = (
    (stat_mod.S_ISDIR, "a directory"),
    (stat_mod.S_ISFIFO, "a FIFO (named pipe)"),
    (stat_mod.S_ISCHR, "a character device"),
    (stat_mod.S_ISBLK, "a block device"),
    (stat_mod.S_ISSOCK, "a socket"),
)
_MAX_PROCS = 8
_NUM_PROBE = 16  # stat calls timed one by one to tell a waiting file system from a computing one
_WAITING_STAT_S = 20e-6  # a cached local stat takes ~2 us, a network round trip >= 100 us
_MIN_PROCS_WORK_S = 0.15  # helper processes start in ~20 ms; below this much stat work they cost more
_SERIAL_CHUNK = 4096
_CHILD_CHUNK = 1024  # sizes per block a helper process sends: how often it reports progress
_MAX_THREAD_CHUNK = 256


class MissingFilesError(FileNotFoundError):
    """Some leaves of the file trees could not be stat-ed; ``missing`` lists (path, reason)."""

    def __init__(self, missing: List[Tuple[str, str]], num_leaves: int):
        self.missing = missing
        shown = "\n".join(f"  {short_repr(p)}: {why}" for p, why in missing[:_MAX_LISTED_MISSING])
        more = f"\n  ... and {len(missing) - _MAX_LISTED_MISSING} more" if len(missing) > _MAX_LISTED_MISSING else ""
        super().__init__(
            f"{len(missing)} of {num_leaves} files are missing or unreadable "
            f"(first {min(len(missing), _MAX_LISTED_MISSING)} listed):\n{shown}{more}\n"
            "Fix or remove these entries from the file list; nothing was written."
        )


class _Reader:
    """Who reads the files: tells from stat records (no further system call) whether a file is a
    regular file that this process may read. Root reads everything; others by the mode bits of
    their class (owner, group, other) -- what those bits deny, :func:`_problem` asks ``os.access``
    again (an ACL may grant it)."""

    def __init__(self):
        self.euid = os.geteuid() if hasattr(os, "geteuid") else 0
        groups = set(os.getgroups()) | {os.getegid()} if hasattr(os, "getegid") else set()
        self.groups = np.array(sorted(groups), dtype=np.int64)

    def classify(self, records) -> np.ndarray:
        """[k, 2] int64: the size (or a negative code: stat failed, not a regular file, not readable)
        and the mtime in ns, per record."""
        rec = np.array(records, dtype=np.int64).reshape(-1, 5)  # a copy: the codes go into it
        size, mode = rec[:, 0], rec[:, 2]
        ok = size >= 0
        regular = (mode & 0o170000) == stat_mod.S_IFREG  # S_IFMT
        size[ok & ~regular] = _NOT_REGULAR
        if self.euid != 0:
            uid, gid = rec[:, 3], rec[:, 4]
            bits = np.where(
                uid == self.euid, mode & 0o400, np.where(np.isin(gid, self.groups), mode & 0o040, mode & 0o004)
            )
            size[ok & regular & (bits == 0)] = _UNREADABLE
        return rec[:, :2]


def _stat_chunk(paths: Sequence[str], reader: _Reader) -> np.ndarray:
    return reader.classify(stat_records(paths))


def collect_file_sizes(
    trees: Sequence[FileTree],
    *,
    num_threads: Optional[int] = None,
    num_procs: Optional[int] = None,
    progress_interval: float = 5.0,
) -> FileSizes:
    """Size of every file tree: the sum of its leaves' sizes, keyed by tree key,
    as RETURNN's ``DistributeFilesDataset._lazy_init_file_sizes`` computes them
    (``os.path.getsize``, so symlinks count as their target), and its modification time
    (the latest of its leaves', in ns).

    Every leaf must be a regular file (or a symlink to one) that this process may read: RETURNN
    would fail opening a directory, FIFO or device, or a file without read permission, although
    its size loop would not notice. Run as root, every file counts as readable (root reads all);
    run the check as the user who trains to see what that user can read.

    Each distinct leaf is stat-ed once. The first few stat calls measure the file
    system: if a stat waits (>= 20 us, a network file system or a cold disk),
    ``num_threads`` threads overlap the waits (stat releases the GIL); if stat only
    costs CPU (local, cached), a large list is split over ``num_procs`` processes,
    because threads would only take turns holding the GIL.
    The input order and duplicate entries are kept.

    :param trees: the ``files`` list of a DistributeFilesDataset
    :param num_threads: threads for a slow file system (default 32; 1: no threads)
    :param num_procs: processes for a fast one (default: usable CPUs, at most 8; 1: only this process)
    :param progress_interval: seconds between progress lines on stderr (none if done sooner)
    :raises MissingFilesError: if any leaf is missing, not a regular file or unreadable (all are listed at once)
    :raises ValueError: if a tree is nested deeper than ``MAX_TREE_DEPTH``

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "a")
    >>> _ = open(p, "wb").write(b"123")
    >>> fs = collect_file_sizes([p, (p, p)])
    >>> fs.sizes.tolist(), fs.keys[1] == p + ":" + p, int(fs.mtimes[0]) == os.stat(p).st_mtime_ns
    ([3, 6], True, True)
    """
    num_threads = DEFAULT_NUM_THREADS if num_threads is None else num_threads
    num_procs = default_num_procs() if num_procs is None else num_procs
    for name, value in (("num_threads", num_threads), ("num_procs", num_procs)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive int")
    leaves_per_tree, keys = _leaves_and_keys(trees)
    if not keys:
        return FileSizes(keys=[], sizes=np.zeros(0, dtype=np.int64), mtimes=np.zeros(0, dtype=np.int64))
    all_leaves = list(itertools.chain.from_iterable(leaves_per_tree))
    paths = list(dict.fromkeys(all_leaves))
    leaf_records = _stat_all(paths, num_threads=num_threads, num_procs=num_procs, progress_interval=progress_interval)
    if len(paths) != len(all_leaves):  # duplicates: stat-ed once, gathered back here
        index = dict(zip(paths, range(len(paths))))
        leaf_records = leaf_records[
            np.fromiter(map(index.__getitem__, all_leaves), dtype=np.int64, count=len(all_leaves))
        ]
    leaf_sizes, leaf_mtimes = leaf_records[:, 0], leaf_records[:, 1]
    counts = np.fromiter(map(len, leaves_per_tree), dtype=np.int64, count=len(leaves_per_tree))
    if int(counts.min()) == int(counts.max()):
        sizes = leaf_sizes.reshape(len(keys), int(counts[0])).sum(axis=1)
        mtimes = leaf_mtimes.reshape(len(keys), int(counts[0])).max(axis=1)
    else:
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sizes = np.add.reduceat(leaf_sizes, starts)
        mtimes = np.maximum.reduceat(leaf_mtimes, starts)
    return FileSizes(
        keys=keys,
        sizes=np.ascontiguousarray(sizes, dtype=np.int64),
        mtimes=np.ascontiguousarray(mtimes, dtype=np.int64),
    )


def _leaves_and_keys(trees: Sequence[FileTree]) -> Tuple[List[Sequence[str]], List[str]]:
    """``leaves_and_keys``, with a tree too deep to walk reported as an error instead of a RecursionError."""
    try:
        return leaves_and_keys(trees)
    except RecursionError:
        pass
    for idx, tree in enumerate(trees):
        depth = tree_depth(tree)
        if depth > MAX_TREE_DEPTH:
            raise ValueError(
                f"file tree entry {idx} is nested more than {MAX_TREE_DEPTH} levels deep; RETURNN's "
                f"file trees are a few levels deep (i6_shard takes at most {MAX_TREE_DEPTH}): fix the list"
            )
    raise ValueError(
        f"a file tree is nested too deeply to walk; RETURNN's file trees are a few levels deep "
        f"(i6_shard takes at most {MAX_TREE_DEPTH}): fix the list"
    )


def default_num_procs(maximum: int = _MAX_PROCS) -> int:
    """Helper processes by default: the CPUs this process may use (its affinity, where the OS tells), at most
    ``maximum``; the one definition for the stat engine, the costs pass and the jobs that run them."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, maximum))


def _file_type(mode: int) -> str:
    return next((name for test, name in _FILE_TYPES if test(mode)), "not a regular file")


def _problem(path: str) -> Tuple[Optional[str], Tuple[int, int]]:
    """Why ``path`` cannot be read as a data file (None: it can, after all), and its (size, mtime_ns)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or type(exc).__name__, (0, 0)
    if not stat_mod.S_ISREG(st.st_mode):
        return f"is {_file_type(st.st_mode)}, not a regular file (RETURNN cannot read it)", (0, 0)
    effective = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    if not os.access(path, os.R_OK, **effective):
        return "no read permission for this user (RETURNN, run as this user, would fail opening it)", (0, 0)
    return None, (st.st_size, st.st_mtime_ns)


def _stat_all(paths: List[str], *, num_threads: int, num_procs: int, progress_interval: float) -> np.ndarray:
    """[n, 2] int64 (size, mtime_ns) of ``paths`` (same order); raises MissingFilesError listing every failure."""
    n = len(paths)
    reader = _Reader()
    out = np.empty((n, 2), dtype=np.int64)
    progress = Progress("file sizes", total=n, interval=progress_interval)
    # Probe: time a few stat calls one by one; the median tells waiting from computing.
    num_probe = min(n, _NUM_PROBE)
    times = []
    for i in range(num_probe):
        t0 = time.perf_counter()
        records = stat_records(paths[i : i + 1])
        times.append(time.perf_counter() - t0)
        out[i] = reader.classify(records)[0]
    per_stat = sorted(times)[num_probe // 2] if times else 0.0
    progress.add(num_probe)
    rest = n - num_probe
    if rest and per_stat >= _WAITING_STAT_S and num_threads > 1:
        _stat_in_threads(paths, out, start=num_probe, num_threads=num_threads, progress=progress, reader=reader)
    elif rest and per_stat * rest >= _MIN_PROCS_WORK_S and num_procs > 1:
        _stat_in_procs(paths, out, start=num_probe, num_procs=num_procs, progress=progress, reader=reader)
    else:
        _stat_serial(paths, out, start=num_probe, stop=n, progress=progress, reader=reader)
    progress.close()
    bad = np.flatnonzero(out[:, 0] < 0).tolist()
    if bad:
        missing = []
        for i in bad:  # again, for the reason (and in case it appeared meanwhile, or an ACL grants reading)
            why, record = _problem(paths[i])
            if why is None:
                out[i] = record
            else:
                missing.append((paths[i], why))
        if missing:
            raise MissingFilesError(missing, n)
    return out


def _stat_serial(
    paths: List[str], out: np.ndarray, *, start: int, stop: int, progress: Progress, reader: _Reader
) -> None:
    for a in range(start, stop, _SERIAL_CHUNK):
        b = min(a + _SERIAL_CHUNK, stop)
        out[a:b] = _stat_chunk(paths[a:b], reader)
        progress.add(b - a)


def _stat_in_threads(
    paths: List[str], out: np.ndarray, *, start: int, num_threads: int, progress: Progress, reader: _Reader
) -> None:
    n = len(paths)
    # Small chunks: each one waits on the file system, and balance matters more than overhead.
    chunk = max(1, min(_MAX_THREAD_CHUNK, (n - start) // (num_threads * 4)))

    def work(a: int) -> None:
        b = min(a + chunk, n)
        out[a:b] = _stat_chunk(paths[a:b], reader)
        progress.add(b - a)

    with concurrent.futures.ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="stat") as pool:
        for _ in pool.map(work, range(start, n, chunk)):
            pass


# Run by helper processes (python -I -S): NUL-separated paths on stdin; per path five native int64
# (size or -1 if stat failed, mtime_ns, mode, uid, gid) on stdout, one block per chunk so that the
# parent can report progress.


def _stat_in_procs(
    paths: List[str],
    out: np.ndarray,
    *,
    start: int,
    num_procs: int,
    progress: Progress,
    reader: _Reader,
    steal: bool = True,
) -> None:
    """This process takes the first share, ``num_procs - 1`` fresh interpreters (spawned, not
    forked: safe with threads) the others. Once done with its own share, this process stats
    the helpers' shares from their far ends backwards until it meets each helper, so a helper
    that is slow to start, starved of CPU, or failing costs no more than doing it here."""
    bounds = np.linspace(start, len(paths), num_procs + 1).astype(np.int64).tolist()
    lock = threading.Lock()
    helpers = [
        _Helper(paths, out, a, b, progress, lock, reader, wait=not steal)
        for a, b in zip(bounds[1:-1], bounds[2:])
        if a < b
    ]
    for helper in helpers:
        helper.start()
    try:
        _stat_serial(paths, out, start=bounds[0], stop=bounds[1], progress=progress, reader=reader)
        while steal:
            with lock:
                helper = max(helpers, key=lambda h: h.limit - h.pos, default=None)
                if helper is None or helper.limit <= helper.pos:
                    break
                b = helper.limit
                a = helper.limit = max(helper.pos, b - _SERIAL_CHUNK)
            out[a:b] = _stat_chunk(paths[a:b], reader)
            progress.add(b - a)
    finally:
        for helper in helpers:
            helper.finish()
    for helper in helpers:  # without stealing: what a failed helper left
        _stat_serial(paths, out, start=helper.pos, stop=helper.limit, progress=progress, reader=reader)


class _Helper:
    """One helper process for ``paths[a:b]``; it fills ``out`` from ``a`` up to ``pos``, the
    parent from ``b`` down to ``limit`` (both change under ``lock``; ``pos <= limit``)."""

    def __init__(
        self,
        paths: List[str],
        out: np.ndarray,
        a: int,
        b: int,
        progress: Progress,
        lock: threading.Lock,
        reader: _Reader,
        *,
        wait: bool = False,
    ):
        self.paths, self.out, self.a, self.b, self.progress, self.lock = paths, out, a, b, progress, lock
        self.reader, self.wait = reader, wait
        self.pos = a
        self.limit = b
        self.proc: Optional[subprocess.Popen] = None
        self.thread = threading.Thread(target=self._run, name="stat-helper", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        """Stop the process, done or not (without stealing: once it has sent all it can)."""
        if self.wait:
            self.thread.join()
        self._stop()
        self.thread.join()

    def _stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()

    def _run(self) -> None:
        if not sys.executable:
            return
        try:
            self.proc = proc = subprocess.Popen(
                [sys.executable, "-I", "-S", stat_child.__file__, str(_CHILD_CHUNK)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            return
        record_bytes = 8 * RECORD_INTS
        try:
            with proc.stdin:
                proc.stdin.write(
                    "\0".join(self.paths[self.a : self.b]).encode(
                        sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
                    )
                )
            while self.pos < self.limit:
                data = proc.stdout.read(_CHILD_CHUNK * record_bytes)
                if len(data) % record_bytes:
                    data += proc.stdout.read(record_bytes - len(data) % record_bytes)
                if not data or len(data) % record_bytes:
                    break
                records = np.frombuffer(data, dtype=np.int64).reshape(-1, RECORD_INTS)
                classified = self.reader.classify(records)
                with self.lock:
                    num = max(0, min(len(classified), self.limit - self.pos))
                    self.out[self.pos : self.pos + num] = classified[:num]
                    self.pos += num
                self.progress.add(num)
        except OSError:  # the helper died or could not start: the parent takes over its share
            pass
        finally:
            self._stop()
            proc.stdout.close()
            proc.wait()
