"""File sizes as RETURNN's DistributeFilesDataset computes them (sum over a tree's
leaves, keyed by the tree key), stat-ed in threads or helper processes, stored compactly."""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..pure.file_tree import FileTree, leaves_and_keys
from .npz import decode_keys, encode_keys, load_npz, save_npz
from .progress import Progress

__all__ = [
    "FileSizes",
    "MissingFilesError",
    "collect_file_sizes",
    "save_file_sizes",
    "load_file_sizes",
    "DEFAULT_NUM_THREADS",
    "FILE_SIZES_FORMAT_VERSION",
]

DEFAULT_NUM_THREADS = 32
FILE_SIZES_FORMAT_VERSION = 1
_MAX_LISTED_MISSING = 20
_MAX_PROCS = 8
_NUM_PROBE = 16  # stat calls timed one by one to tell a waiting file system from a computing one
_WAITING_STAT_S = 20e-6  # a cached local stat takes ~2 us, a network round trip >= 100 us
_MIN_PROCS_WORK_S = 0.15  # helper processes start in ~20 ms; below this much stat work they cost more
_SERIAL_CHUNK = 4096
_CHILD_CHUNK = 1024  # sizes per block a helper process sends: how often it reports progress
_STEAL = True  # the parent takes over the helpers' remaining work once done with its own (tests turn it
# off to see what the helpers alone deliver)
_MAX_THREAD_CHUNK = 256


@dataclass(frozen=True)
class FileSizes:
    """Sizes of the entries of a file list, in list order.

    :ivar keys: tree keys (RETURNN's ``_get_key_for_file_tree``), one per entry
    :ivar sizes: int64 bytes per entry, shape [num_files]
    """

    keys: List[str]
    sizes: np.ndarray

    def __post_init__(self):
        if len(self.keys) != len(self.sizes):
            raise ValueError(f"{len(self.keys)} keys but {len(self.sizes)} sizes; they must pair up")

    def __len__(self) -> int:
        return len(self.keys)

    def as_dict(self) -> Dict[str, int]:
        """key -> size, the form of RETURNN's ``DistributeFilesDataset._file_sizes``."""
        return dict(zip(self.keys, self.sizes.tolist()))


class MissingFilesError(FileNotFoundError):
    """Some leaves of the file trees could not be stat-ed; ``missing`` lists (path, reason)."""

    def __init__(self, missing: List[Tuple[str, str]], num_leaves: int):
        self.missing = missing
        shown = "\n".join(f"  {p!r}: {why}" for p, why in missing[:_MAX_LISTED_MISSING])
        more = f"\n  ... and {len(missing) - _MAX_LISTED_MISSING} more" if len(missing) > _MAX_LISTED_MISSING else ""
        super().__init__(
            f"{len(missing)} of {num_leaves} files are missing or unreadable "
            f"(first {min(len(missing), _MAX_LISTED_MISSING)} listed):\n{shown}{more}\n"
            "Fix or remove these entries from the file list; nothing was written."
        )


def _stat_sizes(paths: Sequence[str]) -> List[int]:
    """``os.stat(p).st_size`` per path (follows symlinks, like ``os.path.getsize``), -1 where it fails."""
    stat = os.stat
    try:
        return [stat(p).st_size for p in paths]
    except OSError:
        pass
    sizes: List[int] = []
    for p in paths:
        try:
            sizes.append(stat(p).st_size)
        except OSError:
            sizes.append(-1)
    return sizes


def collect_file_sizes(
    trees: Sequence[FileTree],
    *,
    num_threads: Optional[int] = None,
    num_procs: Optional[int] = None,
    progress_interval: float = 5.0,
) -> FileSizes:
    """Size of every file tree: the sum of its leaves' sizes, keyed by tree key,
    as RETURNN's ``DistributeFilesDataset._lazy_init_file_sizes`` computes them
    (``os.path.getsize``, so symlinks count as their target).

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
    :raises MissingFilesError: if any leaf is missing or unreadable (all are listed at once)

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "a")
    >>> _ = open(p, "wb").write(b"123")
    >>> fs = collect_file_sizes([p, (p, p)])
    >>> fs.sizes.tolist(), fs.keys[1] == p + ":" + p
    ([3, 6], True)
    """
    leaves_per_tree, keys = leaves_and_keys(trees)
    num_threads = DEFAULT_NUM_THREADS if num_threads is None else num_threads
    num_procs = _default_num_procs() if num_procs is None else num_procs
    for name, value in (("num_threads", num_threads), ("num_procs", num_procs)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive int")
    if not keys:
        return FileSizes(keys=[], sizes=np.zeros(0, dtype=np.int64))
    all_leaves = list(itertools.chain.from_iterable(leaves_per_tree))
    paths = list(dict.fromkeys(all_leaves))
    leaf_sizes = _stat_all(paths, num_threads=num_threads, num_procs=num_procs, progress_interval=progress_interval)
    if len(paths) != len(all_leaves):  # duplicates: stat-ed once, gathered back here
        index = dict(zip(paths, range(len(paths))))
        leaf_sizes = leaf_sizes[np.fromiter(map(index.__getitem__, all_leaves), dtype=np.int64,
                                            count=len(all_leaves))]
    counts = np.fromiter(map(len, leaves_per_tree), dtype=np.int64, count=len(leaves_per_tree))
    if int(counts.min()) == int(counts.max()):
        sizes = leaf_sizes.reshape(len(keys), int(counts[0])).sum(axis=1)
    else:
        sizes = np.add.reduceat(leaf_sizes, np.concatenate([[0], np.cumsum(counts)[:-1]]))
    return FileSizes(keys=keys, sizes=np.ascontiguousarray(sizes, dtype=np.int64))


def _default_num_procs() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, _MAX_PROCS))


def _stat_all(paths: List[str], *, num_threads: int, num_procs: int, progress_interval: float) -> np.ndarray:
    """Sizes of ``paths`` (int64, same order); raises MissingFilesError listing every failure."""
    n = len(paths)
    out = np.empty(n, dtype=np.int64)
    progress = Progress("file sizes", total=n, interval=progress_interval)
    # Probe: time a few stat calls one by one; the median tells waiting from computing.
    num_probe = min(n, _NUM_PROBE)
    times = []
    for i in range(num_probe):
        t0 = time.perf_counter()
        out[i] = _stat_sizes(paths[i:i + 1])[0]
        times.append(time.perf_counter() - t0)
    per_stat = sorted(times)[num_probe // 2] if times else 0.0
    progress.add(num_probe)
    rest = n - num_probe
    if rest and per_stat >= _WAITING_STAT_S and num_threads > 1:
        _stat_in_threads(paths, out, start=num_probe, num_threads=num_threads, progress=progress)
    elif rest and per_stat * rest >= _MIN_PROCS_WORK_S and num_procs > 1:
        _stat_in_procs(paths, out, start=num_probe, num_procs=num_procs, progress=progress)
    else:
        _stat_serial(paths, out, start=num_probe, stop=n, progress=progress)
    progress.close()
    bad = np.flatnonzero(out < 0).tolist()
    if bad:
        missing = []
        for i in bad:  # again, for the reason (and in case it appeared meanwhile)
            try:
                out[i] = os.stat(paths[i]).st_size
            except OSError as exc:
                missing.append((paths[i], exc.strerror or type(exc).__name__))
        if missing:
            raise MissingFilesError(missing, n)
    return out


def _stat_serial(paths: List[str], out: np.ndarray, *, start: int, stop: int, progress: Progress) -> None:
    for a in range(start, stop, _SERIAL_CHUNK):
        b = min(a + _SERIAL_CHUNK, stop)
        out[a:b] = _stat_sizes(paths[a:b])
        progress.add(b - a)


def _stat_in_threads(paths: List[str], out: np.ndarray, *, start: int, num_threads: int,
                     progress: Progress) -> None:
    n = len(paths)
    # Small chunks: each one waits on the file system, and balance matters more than overhead.
    chunk = max(1, min(_MAX_THREAD_CHUNK, (n - start) // (num_threads * 4)))

    def work(a: int) -> None:
        b = min(a + chunk, n)
        out[a:b] = _stat_sizes(paths[a:b])
        progress.add(b - a)

    with concurrent.futures.ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="stat") as pool:
        for _ in pool.map(work, range(start, n, chunk)):
            pass


# Run by helper processes (python -I -S): NUL-separated paths on stdin, native int64 sizes
# (-1: failed) on stdout, one block per chunk so that the parent can report progress.
_CHILD_CODE = """
import os, sys
from array import array
chunk_size = int(sys.argv[1])
data = sys.stdin.buffer.read()
paths = data.split(b"\\0") if data else []
stat = os.stat
out = sys.stdout.buffer
for i in range(0, len(paths), chunk_size):
    chunk = paths[i:i + chunk_size]
    try:
        sizes = [stat(p).st_size for p in chunk]
    except OSError:
        sizes = []
        for p in chunk:
            try:
                sizes.append(stat(p).st_size)
            except OSError:
                sizes.append(-1)
    out.write(array("q", sizes).tobytes())
    out.flush()
"""


def _stat_in_procs(paths: List[str], out: np.ndarray, *, start: int, num_procs: int, progress: Progress) -> None:
    """This process takes the first share, ``num_procs - 1`` fresh interpreters (spawned, not
    forked: safe with threads) the others. Once done with its own share, this process stats
    the helpers' shares from their far ends backwards until it meets each helper, so a helper
    that is slow to start, starved of CPU, or failing costs no more than doing it here."""
    bounds = np.linspace(start, len(paths), num_procs + 1).astype(np.int64).tolist()
    lock = threading.Lock()
    helpers = [_Helper(paths, out, a, b, progress, lock) for a, b in zip(bounds[1:-1], bounds[2:]) if a < b]
    for helper in helpers:
        helper.start()
    try:
        _stat_serial(paths, out, start=bounds[0], stop=bounds[1], progress=progress)
        while _STEAL:
            with lock:
                helper = max(helpers, key=lambda h: h.limit - h.pos, default=None)
                if helper is None or helper.limit <= helper.pos:
                    break
                b = helper.limit
                a = helper.limit = max(helper.pos, b - _SERIAL_CHUNK)
            out[a:b] = _stat_sizes(paths[a:b])
            progress.add(b - a)
    finally:
        for helper in helpers:
            helper.finish()
    for helper in helpers:  # without stealing: what a failed helper left
        _stat_serial(paths, out, start=helper.pos, stop=helper.limit, progress=progress)


class _Helper:
    """One helper process for ``paths[a:b]``; it fills ``out`` from ``a`` up to ``pos``, the
    parent from ``b`` down to ``limit`` (both change under ``lock``; ``pos <= limit``)."""

    def __init__(self, paths: List[str], out: np.ndarray, a: int, b: int, progress: Progress,
                 lock: threading.Lock):
        self.paths, self.out, self.a, self.b, self.progress, self.lock = paths, out, a, b, progress, lock
        self.pos = a
        self.limit = b
        self.proc: Optional[subprocess.Popen] = None
        self.thread = threading.Thread(target=self._run, name="stat-helper", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        """Stop the process, done or not (without stealing: once it has sent all it can)."""
        if not _STEAL:
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
                [sys.executable, "-I", "-S", "-c", _CHILD_CODE, str(_CHILD_CHUNK)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return
        try:
            with proc.stdin:
                proc.stdin.write("\0".join(self.paths[self.a:self.b]).encode(
                    sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()))
            while self.pos < self.limit:
                data = proc.stdout.read(_CHILD_CHUNK * 8)
                if len(data) % 8:
                    data += proc.stdout.read(8 - len(data) % 8)
                if not data or len(data) % 8:
                    break
                sizes = np.frombuffer(data, dtype=np.int64)
                with self.lock:
                    num = max(0, min(len(sizes), self.limit - self.pos))
                    self.out[self.pos:self.pos + num] = sizes[:num]
                    self.pos += num
                self.progress.add(num)
        except OSError:  # the helper died or could not start: the parent takes over its share
            pass
        finally:
            self._stop()
            proc.stdout.close()
            proc.wait()


def save_file_sizes(file_sizes: FileSizes, path: str | os.PathLike) -> None:
    """Store sizes as a deterministic ``.npz`` (written atomically) with three arrays:

    - ``keys_utf8``: uint8, the keys encoded as UTF-8 (``surrogatepass``), joined by NUL bytes
      (a NUL never occurs in a file name);
    - ``sizes``: int64, shape [num_files], in list order;
    - ``format_version``: int64 scalar, currently 1.

    The zip members are deflated (level 1) and carry fixed timestamps, so equal sizes give
    equal bytes. Any numpy can read it:
    ``keys = d["keys_utf8"].tobytes().decode("utf-8", "surrogatepass").split("\\0")`` (no keys if
    ``sizes`` is empty).

    :raises ValueError: if a key holds a NUL byte, or the sizes are not integers in [0, 2**63)
    """
    sizes = np.asarray(file_sizes.sizes)
    if sizes.ndim != 1 or (sizes.size and sizes.dtype.kind not in "iu"):
        raise ValueError(f"sizes must be a vector of integers, got {sizes.dtype}{list(sizes.shape)}")
    if sizes.size and sizes.dtype.kind == "i" and int(sizes.min()) < 0:
        bad = int(np.argmax(sizes < 0))
        raise ValueError(f"sizes must be >= 0 (bytes), but entry {bad} ({file_sizes.keys[bad]!r}) has "
                         f"{int(sizes[bad])} ({int(np.count_nonzero(sizes < 0))} negative in all); nothing was written")
    if sizes.size and sizes.dtype.kind == "u" and int(sizes.max()) >= 2**63:
        bad = int(np.argmax(sizes >= 2**63))
        raise ValueError(f"sizes must fit int64, but entry {bad} ({file_sizes.keys[bad]!r}) has {int(sizes[bad])}; "
                         "nothing was written")
    save_npz(path, {
        "format_version": np.array(FILE_SIZES_FORMAT_VERSION, dtype=np.int64),
        "keys_utf8": encode_keys(file_sizes.keys),
        "sizes": sizes.astype(np.int64),
    })


def load_file_sizes(path: str | os.PathLike) -> FileSizes:
    """Load what :func:`save_file_sizes` wrote.

    :raises FileNotFoundError: if ``path`` does not exist
    :raises ValueError: if the file is not a file-sizes archive of a known version
    """
    path = os.fspath(path)
    data = load_npz(path, kind="file sizes archive",
                    missing=f"file sizes {path!r} do not exist; compute them with ComputeFileSizesJob "
                            "or `python -m i6_shard sizes`")
    if set(data) != {"format_version", "keys_utf8", "sizes"}:
        raise ValueError(f"{path!r} is not a file sizes archive (it holds arrays {sorted(data)}, "
                         "expected format_version, keys_utf8, sizes)")
    version, keys_utf8, sizes = data["format_version"], data["keys_utf8"], data["sizes"]
    if version.shape != () or version.dtype.kind not in "iu" or int(version) != FILE_SIZES_FORMAT_VERSION:
        raise ValueError(f"{path!r} has file sizes format {version!r}; this i6_shard reads "
                         f"format {FILE_SIZES_FORMAT_VERSION}")
    if sizes.dtype != np.int64 or sizes.ndim != 1:
        raise ValueError(f"{path!r} is corrupt: sizes {sizes.dtype}{list(sizes.shape)}; expected an int64 vector")
    keys = decode_keys(keys_utf8, num_keys=len(sizes), path=path)
    return FileSizes(keys=keys, sizes=sizes)
