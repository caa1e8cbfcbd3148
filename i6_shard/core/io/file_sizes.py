"""File sizes as RETURNN's DistributeFilesDataset computes them (sum over a tree's
leaves, keyed by the tree key), stat-ed in threads or helper processes, stored compactly with
the files' modification times, and a cheap check that a sample of the files did not change since."""

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
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..pure.args import first_negative
from ..pure.file_tree import FileTree, leaves_and_keys
from ..pure.settings import UNITS
from .npz import decode_keys, encode_keys, open_npz, save_npz
from .preflight import short_repr
from . import stat_child
from .progress import Progress
from .stat_child import FAILED_RECORD, RECORD_INTS, stat_records

__all__ = [
    "FileSizes",
    "MissingFilesError",
    "collect_file_sizes",
    "save_file_sizes",
    "load_file_sizes",
    "DEFAULT_NUM_THREADS",
    "FILE_SIZES_FORMAT_VERSION",
    "MAX_TREE_DEPTH",
]

DEFAULT_NUM_THREADS = 32
#: Written when the modification times are known (format 2 adds ``mtimes_ns``); format 1 is still read.
FILE_SIZES_FORMAT_VERSION = 2
#: Format 3 is a costs archive (core/io/file_costs.py): costs in another unit than bytes, the unit named in
#: ``unit_utf8``, with the files' sequence counts, frames and sequence length quantiles.
FILE_COSTS_FORMAT_VERSION = 3
COSTS_ARRAYS = ("unit_utf8", "num_seqs", "num_frames", "seq_length_quantiles")
#: A costs archive in steps also holds the batching limits of its steps: int64 [batch_size, max_seqs], 0: no limit.
STEPS_BATCHING_ARRAY = "steps_batching"
_ARCHIVE_ARRAYS = {1: {"format_version", "keys_utf8", "sizes"}, 2: {"format_version", "keys_utf8", "sizes", "mtimes_ns"},
                   3: {"format_version", "keys_utf8", "sizes", "mtimes_ns", *COSTS_ARRAYS}}
_MAX_UNIT_BYTES = 64
#: Deepest file tree accepted (lists in lists ...); RETURNN's file trees are a few levels deep.
MAX_TREE_DEPTH = 100
_MAX_LISTED_MISSING = 20
# Codes in the size array for leaves that stat-ed but cannot be read as data files.
_STAT_FAILED, _NOT_REGULAR, _UNREADABLE = FAILED_RECORD[0], -2, -3
_FILE_TYPES = ((stat_mod.S_ISDIR, "a directory"), (stat_mod.S_ISFIFO, "a FIFO (named pipe)"),
               (stat_mod.S_ISCHR, "a character device"), (stat_mod.S_ISBLK, "a block device"),
               (stat_mod.S_ISSOCK, "a socket"))
_MAX_PROCS = 8
_NUM_PROBE = 16  # stat calls timed one by one to tell a waiting file system from a computing one
_WAITING_STAT_S = 20e-6  # a cached local stat takes ~2 us, a network round trip >= 100 us
_MIN_PROCS_WORK_S = 0.15  # helper processes start in ~20 ms; below this much stat work they cost more
_SERIAL_CHUNK = 4096
_CHILD_CHUNK = 1024  # sizes per block a helper process sends: how often it reports progress
_MAX_THREAD_CHUNK = 256


@dataclass(frozen=True)
class FileSizes:
    """Sizes of the entries of a file list, in list order.

    :ivar keys: tree keys (RETURNN's ``_get_key_for_file_tree``), one per entry
    :ivar sizes: int64 bytes per entry, shape [num_files]
    :ivar mtimes: int64 modification time per entry in ns since the epoch (the latest of its leaves'),
        shape [num_files]; None where unknown (an archive of format 1)
    :ivar unit: what ``sizes`` counts: "bytes", or the unit of a costs archive ("frames", "seqs", ...)
    """

    keys: List[str]
    sizes: np.ndarray
    mtimes: Optional[np.ndarray] = None
    unit: str = "bytes"

    def __post_init__(self):
        if len(self.keys) != len(self.sizes):
            raise ValueError(f"{len(self.keys)} keys but {len(self.sizes)} sizes; they must pair up")
        if self.mtimes is not None and len(self.mtimes) != len(self.sizes):
            raise ValueError(f"{len(self.mtimes)} mtimes but {len(self.sizes)} sizes; they must pair up")

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def concatenate(cls, parts: Sequence["FileSizes"]) -> "FileSizes":
        """The parts one after the other (e.g. the parts of a split list); mtimes only if all parts have them.

        >>> a = FileSizes(["x"], np.array([1]), np.array([5])); b = FileSizes(["y"], np.array([2]), np.array([6]))
        >>> c = FileSizes.concatenate([a, b]); c.keys, c.sizes.tolist(), c.mtimes.tolist()
        (['x', 'y'], [1, 2], [5, 6])
        """
        keys = [k for p in parts for k in p.keys]
        sizes = np.concatenate([np.asarray(p.sizes, dtype=np.int64) for p in parts] or [np.zeros(0, np.int64)])
        known = parts and all(p.mtimes is not None for p in parts)
        mtimes = np.concatenate([np.asarray(p.mtimes, dtype=np.int64) for p in parts]) if known else None
        return cls(keys=keys, sizes=sizes, mtimes=mtimes)

    def as_dict(self) -> Dict[str, int]:
        """key -> size, the form of RETURNN's ``DistributeFilesDataset._file_sizes``."""
        return dict(zip(self.keys, self.sizes.tolist()))


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
            bits = np.where(uid == self.euid, mode & 0o400,
                            np.where(np.isin(gid, self.groups), mode & 0o040, mode & 0o004))
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
        leaf_records = leaf_records[np.fromiter(map(index.__getitem__, all_leaves), dtype=np.int64,
                                                count=len(all_leaves))]
    leaf_sizes, leaf_mtimes = leaf_records[:, 0], leaf_records[:, 1]
    counts = np.fromiter(map(len, leaves_per_tree), dtype=np.int64, count=len(leaves_per_tree))
    if int(counts.min()) == int(counts.max()):
        sizes = leaf_sizes.reshape(len(keys), int(counts[0])).sum(axis=1)
        mtimes = leaf_mtimes.reshape(len(keys), int(counts[0])).max(axis=1)
    else:
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sizes = np.add.reduceat(leaf_sizes, starts)
        mtimes = np.maximum.reduceat(leaf_mtimes, starts)
    return FileSizes(keys=keys, sizes=np.ascontiguousarray(sizes, dtype=np.int64),
                     mtimes=np.ascontiguousarray(mtimes, dtype=np.int64))


def _leaves_and_keys(trees: Sequence[FileTree]) -> Tuple[List[Sequence[str]], List[str]]:
    """``leaves_and_keys``, with a tree too deep to walk reported as an error instead of a RecursionError."""
    try:
        return leaves_and_keys(trees)
    except RecursionError:
        pass
    for idx, tree in enumerate(trees):
        depth = tree_depth(tree)
        if depth > MAX_TREE_DEPTH:
            raise ValueError(f"file tree entry {idx} is nested more than {MAX_TREE_DEPTH} levels deep; RETURNN's "
                             f"file trees are a few levels deep (i6_shard takes at most {MAX_TREE_DEPTH}): fix the list")
    raise ValueError(f"a file tree is nested too deeply to walk; RETURNN's file trees are a few levels deep "
                     f"(i6_shard takes at most {MAX_TREE_DEPTH}): fix the list")


def tree_depth(tree: object, *, limit: int = MAX_TREE_DEPTH) -> int:
    """How deeply lists, tuples and dicts nest in ``tree`` (a str: 0), walked without recursion;
    counting stops a level beyond ``limit``.

    >>> tree_depth("a"), tree_depth(["a", ("b", {"k": ["c"]})]), tree_depth([[[[]]]], limit=2)
    (0, 4, 3)
    """
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (list, tuple, dict)):
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((child, depth) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


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
        records = stat_records(paths[i:i + 1])
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


def _stat_serial(paths: List[str], out: np.ndarray, *, start: int, stop: int, progress: Progress,
                 reader: _Reader) -> None:
    for a in range(start, stop, _SERIAL_CHUNK):
        b = min(a + _SERIAL_CHUNK, stop)
        out[a:b] = _stat_chunk(paths[a:b], reader)
        progress.add(b - a)


def _stat_in_threads(paths: List[str], out: np.ndarray, *, start: int, num_threads: int,
                     progress: Progress, reader: _Reader) -> None:
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


def _stat_in_procs(paths: List[str], out: np.ndarray, *, start: int, num_procs: int, progress: Progress,
                   reader: _Reader, steal: bool = True) -> None:
    """This process takes the first share, ``num_procs - 1`` fresh interpreters (spawned, not
    forked: safe with threads) the others. Once done with its own share, this process stats
    the helpers' shares from their far ends backwards until it meets each helper, so a helper
    that is slow to start, starved of CPU, or failing costs no more than doing it here."""
    bounds = np.linspace(start, len(paths), num_procs + 1).astype(np.int64).tolist()
    lock = threading.Lock()
    helpers = [_Helper(paths, out, a, b, progress, lock, reader, wait=not steal)
               for a, b in zip(bounds[1:-1], bounds[2:]) if a < b]
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

    def __init__(self, paths: List[str], out: np.ndarray, a: int, b: int, progress: Progress,
                 lock: threading.Lock, reader: _Reader, *, wait: bool = False):
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
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return
        record_bytes = 8 * RECORD_INTS
        try:
            with proc.stdin:
                proc.stdin.write("\0".join(self.paths[self.a:self.b]).encode(
                    sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()))
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
                    self.out[self.pos:self.pos + num] = classified[:num]
                    self.pos += num
                self.progress.add(num)
        except OSError:  # the helper died or could not start: the parent takes over its share
            pass
        finally:
            self._stop()
            proc.stdout.close()
            proc.wait()


def save_file_sizes(file_sizes: FileSizes, path: str | os.PathLike) -> None:
    """Store sizes as a deterministic ``.npz`` (written atomically) with these arrays:

    - ``keys_utf8``: uint8, the keys encoded as UTF-8 (``surrogatepass``), joined by NUL bytes
      (a NUL never occurs in a file name);
    - ``sizes``: int64, shape [num_files], in list order;
    - ``mtimes_ns``: int64, shape [num_files], each entry's modification time in ns since the epoch
      (the latest of its leaves'), when ``file_sizes.mtimes`` is known;
    - ``format_version``: int64 scalar: 2 with ``mtimes_ns``, else 1 (the format before it, same bytes).

    The zip members are deflated (level 1) and carry fixed timestamps, so equal sizes give
    equal bytes. Any numpy can read it:
    ``keys = d["keys_utf8"].tobytes().decode("utf-8", "surrogatepass").split("\\0")`` (no keys if
    ``sizes`` is empty).

    :raises ValueError: if ``path`` does not end in ``.npz``, a key holds a NUL byte, or the sizes are
        not integers in [0, 2**63)
    """
    if file_sizes.unit != "bytes":
        raise ValueError(f"these are costs in {file_sizes.unit}, not sizes in bytes; write them with "
                         "core.io.file_costs.save_file_costs, which records the unit")
    sizes = np.asarray(file_sizes.sizes)
    if sizes.ndim != 1 or (sizes.size and sizes.dtype.kind not in "iu"):
        raise ValueError(f"sizes must be a vector of integers, got {sizes.dtype}{list(sizes.shape)}")
    _check_not_negative(sizes, file_sizes.keys, where="sizes must be >= 0 (bytes), but", fix="nothing was written")
    if sizes.size and sizes.dtype.kind == "u" and int(sizes.max()) >= 2**63:
        bad = int(np.argmax(sizes >= 2**63))
        raise ValueError(f"sizes must fit int64, but entry {bad} ({short_repr(file_sizes.keys[bad])}) has "
                         f"{int(sizes[bad])}; nothing was written")
    arrays = {
        "format_version": np.array(1, dtype=np.int64),
        "keys_utf8": encode_keys(file_sizes.keys),
        "sizes": sizes.astype(np.int64),
    }
    if file_sizes.mtimes is not None:
        mtimes = np.asarray(file_sizes.mtimes)
        if mtimes.shape != sizes.shape or (mtimes.size and mtimes.dtype.kind not in "iu"):
            raise ValueError(f"mtimes must be a vector of integers (ns) like sizes, got "
                             f"{mtimes.dtype}{list(mtimes.shape)}")
        arrays["format_version"] = np.array(2, dtype=np.int64)
        arrays["mtimes_ns"] = mtimes.astype(np.int64)
    save_npz(path, arrays, kind="file sizes archive")


def _check_not_negative(sizes: np.ndarray, keys: Sequence[str], *, where: str, fix: str) -> None:
    bad = first_negative(sizes)
    if bad is not None:
        raise ValueError(f"{where} entry {bad} ({short_repr(keys[bad])}) has {int(sizes[bad])} "
                         f"({int(np.count_nonzero(sizes < 0))} negative in all); {fix}")


def load_file_sizes(path: str | os.PathLike) -> FileSizes:
    """Load what :func:`save_file_sizes` wrote (format 2, or 1 without modification times).

    The archive's member headers are checked against each other and against the members' sizes
    before any data is inflated, so a crafted or corrupt file costs no more memory than its
    real contents.

    :raises FileNotFoundError: if ``path`` does not exist
    :raises ValueError: if the file is not a file-sizes archive of a known version, or holds a negative size
    """
    path = os.fspath(path)
    kind = "file sizes archive"
    with open_npz(path, kind=kind, missing=f"file sizes {path!r} do not exist; compute them with "
                                          "ComputeFileSizesJob or `python -m i6_shard sizes`") as npz:
        headers = npz.headers
        names = set(headers)
        has_batching = STEPS_BATCHING_ARRAY in names and "unit_utf8" in names
        if has_batching:
            names.discard(STEPS_BATCHING_ARRAY)  # checked with the unit below
        if names not in _ARCHIVE_ARRAYS.values():
            raise ValueError(f"{path!r} is not a file sizes archive (it holds arrays {sorted(names)[:10]}, expected "
                             "format_version, keys_utf8, sizes and, from format 2 on, mtimes_ns; a costs archive "
                             f"also {', '.join(COSTS_ARRAYS)})")
        unit_h = headers.get("unit_utf8")
        if unit_h is not None and (unit_h.dtype != np.uint8 or len(unit_h.shape) != 1
                                   or not 0 < unit_h.shape[0] <= _MAX_UNIT_BYTES):
            raise ValueError(f"{path!r} is corrupt: unit_utf8 is {unit_h.dtype}{list(unit_h.shape)}, expected a "
                             f"uint8 vector of 1..{_MAX_UNIT_BYTES} bytes")
        version_h, keys_h, sizes_h = headers["format_version"], headers["keys_utf8"], headers["sizes"]
        if version_h.shape != () or version_h.dtype.kind not in "iu":
            raise ValueError(f"{path!r} is corrupt: format_version is {version_h.dtype}{list(version_h.shape)}")
        if sizes_h.dtype != np.int64 or len(sizes_h.shape) != 1:
            raise ValueError(f"{path!r} is corrupt: sizes {sizes_h.dtype}{list(sizes_h.shape)}; expected an int64 "
                             "vector")
        num = sizes_h.shape[0]
        mtimes_h = headers.get("mtimes_ns")
        if mtimes_h is not None and (mtimes_h.dtype != np.int64 or mtimes_h.shape != (num,)):
            raise ValueError(f"{path!r} is corrupt: mtimes_ns {mtimes_h.dtype}{list(mtimes_h.shape)} for {num} "
                             "sizes; expected an int64 vector like sizes")
        if keys_h.dtype != np.uint8 or len(keys_h.shape) != 1:
            raise ValueError(f"{path!r} is corrupt: keys_utf8 is {keys_h.dtype}{list(keys_h.shape)}, expected a "
                             "uint8 vector")
        if (num == 0 and keys_h.shape[0]) or keys_h.shape[0] < num - 1:
            raise ValueError(f"{path!r} is corrupt: {keys_h.shape[0]} bytes of keys cannot hold {num} keys")
        version = npz.read("format_version")
        if int(version) not in _ARCHIVE_ARRAYS or _ARCHIVE_ARRAYS[int(version)] != names:
            raise ValueError(f"{path!r} has file sizes format {int(version)} with arrays {sorted(names)}; this "
                             f"i6_shard reads formats {sorted(set(_ARCHIVE_ARRAYS) - {FILE_COSTS_FORMAT_VERSION})} "
                             f"({FILE_SIZES_FORMAT_VERSION}: with mtimes_ns) and costs archives (format "
                             f"{FILE_COSTS_FORMAT_VERSION})")
        sizes = npz.read("sizes")
        keys = decode_keys(npz.read("keys_utf8"), num_keys=num, path=path)
        mtimes = npz.read("mtimes_ns") if mtimes_h is not None else None
        unit = "bytes" if unit_h is None else _read_unit(npz.read("unit_utf8"), path=path)
    if has_batching != (unit == "steps"):
        raise ValueError(f"{path!r} is corrupt: a costs archive holds {STEPS_BATCHING_ARRAY} if and only if its unit "
                         f"is steps (its unit is {unit!r})")
    _check_not_negative(sizes, keys, where=f"{path!r} is corrupt: sizes must be >= 0 (bytes), but",
                        fix="compute the sizes again (ComputeFileSizesJob or `python -m i6_shard sizes`)")
    return FileSizes(keys=keys, sizes=sizes, mtimes=mtimes, unit=unit)


def _read_unit(data: np.ndarray, *, path: str) -> str:
    """The unit of a costs archive, one of ``pure.settings.UNITS`` other than bytes."""
    unit = data.tobytes().decode("utf-8", "replace")
    if unit not in UNITS or unit == "bytes":
        raise ValueError(f"{path!r} is corrupt: its unit is {unit!r}; a costs archive counts one of {UNITS[1:]}")
    return unit
