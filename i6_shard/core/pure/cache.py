"""Per-node file cache of a plan: the bytes each node must hold at once in its local cache (RETURNN's
``CachedFile``) and the bytes it reads from the shared file system, per sub-epoch, given the ranks per
node and DistributeFilesDataset's ``preload_next_n_sub_epochs``; which ``partition_epoch`` values fit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .args import check_bool, check_int
from .plan import ShardPlan
from .settings import PlanSettings  # noqa: F401 (doctests)
from .stats import num_full_epochs_for

__all__ = ["DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS", "check_preload_next_n_sub_epochs", "parse_bytes"]

#: DistributeFilesDataset's ``preload_next_n_sub_epochs`` when not set: 1 with ``use_worker_proc=True`` (its
#: default), 0 without (``returnn/datasets/distrib_files.py``, ``DistributeFilesDataset.__init__``).
DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS = 1
#: The most sub-epochs RETURNN may be told to load ahead: it creates a sub-epoch dataset for each (opening its
#: files), so real values are 0 to a few; the plan holds them after the last sub-epoch, its time grows with them.
MAX_PRELOAD_NEXT_N_SUB_EPOCHS = 100


def check_preload_next_n_sub_epochs(value: Any) -> int:
    """DistributeFilesDataset's ``preload_next_n_sub_epochs`` as an int in [0, :data:`MAX_PRELOAD_NEXT_N_SUB_EPOCHS`].

    >>> check_preload_next_n_sub_epochs(10**9)
    Traceback (most recent call last):
    ...
    ValueError: preload_next_n_sub_epochs=1000000000 is more than 100: RETURNN would create that many sub-epoch datasets ahead of the one it trains on (its default is 1 with use_worker_proc=True, else 0); give the dataset's own value
    """
    value = check_int(
        value,
        name="preload_next_n_sub_epochs",
        minimum=0,
        hint=(
            f"sub-epoch datasets RETURNN loads ahead; its default is {DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS}, 0 with "
            "use_worker_proc=False"
        ),
    )
    if value > MAX_PRELOAD_NEXT_N_SUB_EPOCHS:
        raise ValueError(
            f"preload_next_n_sub_epochs={value} is more than {MAX_PRELOAD_NEXT_N_SUB_EPOCHS}: RETURNN "
            "would create that many sub-epoch datasets ahead of the one it trains on (its default is "
            f"{DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS} with use_worker_proc=True, else 0); give the "
            "dataset's own value"
        )
    return value


Layout = Callable[[int, int], Tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class NodeCache:
    """How the ranks sit on the nodes and read their files.

    :ivar ranks_per_node: ranks (GPUs) per node; rank r runs on node ``r // ranks_per_node``, as torchrun
        and Slurm place ranks by default (the last node may have fewer)
    :ivar preload_next_n_sub_epochs: DistributeFilesDataset's option: at sub-epoch e, the sub-epoch datasets
        of e+1..e+n are created too (:data:`DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS`, or 0 with ``use_worker_proc=False``)
    :ivar cached_file: ``get_sub_epoch_dataset`` wraps the files in ``CachedFile``: a file is copied into the
        node's cache when the first sub-epoch dataset that needs it is created, and is in use until the last
        one ends; one copy serves every rank of the node. Without it, every rank reads its files from the
        shared file system itself and the node caches nothing
    :ivar constant_bytes: bytes of the files the sub-epoch dataset reads in every sub-epoch besides its bin's
        (the sub-epoch template's own files, ``sub_epoch_constant_files`` of the config reader): with
        ``cached_file`` every node holds them in every sub-epoch and reads them once, in the first; without,
        every rank reads them from the shared file system in every sub-epoch

    >>> NodeCache(ranks_per_node=0)
    Traceback (most recent call last):
    ...
    ValueError: ranks_per_node=0 must be a positive int (GPUs per node)
    """

    ranks_per_node: int
    preload_next_n_sub_epochs: int = DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS
    cached_file: bool = True
    constant_bytes: int = 0

    def __post_init__(self):
        object.__setattr__(
            self,
            "ranks_per_node",
            check_int(self.ranks_per_node, name="ranks_per_node", minimum=1, hint="GPUs per node"),
        )
        object.__setattr__(
            self, "preload_next_n_sub_epochs", check_preload_next_n_sub_epochs(self.preload_next_n_sub_epochs)
        )
        object.__setattr__(self, "cached_file", check_bool(self.cached_file, name="cached_file"))
        object.__setattr__(
            self,
            "constant_bytes",
            check_int(
                self.constant_bytes,
                name="constant_bytes",
                minimum=0,
                hint="bytes of the files the sub-epoch dataset reads in every sub-epoch; 0 for none",
            ),
        )

    def num_nodes(self, num_shards: int) -> int:
        """Nodes that ``num_shards`` ranks take.

        >>> NodeCache(ranks_per_node=4).num_nodes(6)
        2
        """
        return -(-int(num_shards) // self.ranks_per_node)

    def ranks_of(self, node_idx: int, *, num_shards: int) -> range:
        """The ranks on node ``node_idx``.

        >>> list(NodeCache(ranks_per_node=4).ranks_of(1, num_shards=6))
        [4, 5]
        """
        return range(node_idx * self.ranks_per_node, min((node_idx + 1) * self.ranks_per_node, int(num_shards)))

    def as_dict(self) -> Dict[str, object]:
        """The settings as JSON types (``constant_bytes`` only where there are such files)."""
        out: Dict[str, object] = {
            "ranks_per_node": self.ranks_per_node,
            "preload_next_n_sub_epochs": self.preload_next_n_sub_epochs,
            "cached_file": self.cached_file,
        }
        if self.constant_bytes:
            out["constant_bytes"] = self.constant_bytes
        return out


@dataclass(frozen=True)
class CacheFootprint:
    """What each node holds and reads in sub-epochs ``1..num_epochs``. Files are told apart by their
    tree key (one cached copy per key), and their size is the plan's cost, i.e. bytes.

    :ivar held_bytes: int64, shape [num_epochs, num_nodes]: bytes node n must hold at once in sub-epoch e
        (row e-1): the distinct files of its ranks' bins of sub-epochs e..e+preload_next_n_sub_epochs
        (RETURNN preloads past num_epochs too: its dataset does not know where the training ends), plus the
        node cache's ``constant_bytes``; 0 without ``cached_file``
    :ivar held_files: int64, shape [num_epochs, num_nodes]: the number of those files (the bins' files only)
    :ivar shared_fs_bytes: int64, shape [num_epochs, num_nodes]: bytes node n reads from the shared file
        system in sub-epoch e. With ``cached_file``: the files it holds in e but did not hold in e-1 (a
        cache that keeps only what is in use; a bigger one may still have some); without: every rank's
        files of sub-epoch e, read by each rank itself; the ``constant_bytes`` in sub-epoch 1 with ``cached_file``,
        and once per rank in every sub-epoch without
    """

    node_cache: NodeCache
    num_shards: int
    partition_epoch: int
    num_epochs: int
    held_bytes: np.ndarray
    held_files: np.ndarray
    shared_fs_bytes: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.held_bytes.shape[1])

    @property
    def peak_bytes(self) -> int:
        """Bytes the fullest node holds at once, over the whole training."""
        return int(self.held_bytes.max()) if self.held_bytes.size else 0

    @property
    def peak_place(self) -> Tuple[int, int]:
        """``(epoch, node_idx)`` of the first sub-epoch and node where :attr:`peak_bytes` is reached."""
        e, n = np.unravel_index(int(np.argmax(self.held_bytes)), self.held_bytes.shape)
        return int(e) + 1, int(n)


def _key_ids(plan: ShardPlan) -> Tuple[Optional[np.ndarray], np.ndarray]:
    """Entry index -> id of its key (None when every key is unique), and the cost per id (first entry's)."""
    if len(set(plan.keys)) == plan.num_files:
        return None, plan.costs
    keys = np.empty(plan.num_files, dtype=object)
    keys[:] = plan.keys
    _, first, ids = np.unique(keys, return_index=True, return_inverse=True)
    return ids.astype(np.int64).reshape(-1), plan.costs[first]


def compute_cache_footprint(
    plan: ShardPlan, *, node_cache: NodeCache, num_epochs: int, layout: Optional[Layout] = None
) -> CacheFootprint:
    """Bytes held and read per node and sub-epoch over sub-epochs ``1..num_epochs``, as RETURNN's
    ``DistributeFilesDataset.init_seq_order`` creates (and preloads) the sub-epoch datasets of each rank and
    ``returnn.util.file_cache.FileCache`` copies their ``CachedFile`` s.

    A node's window in sub-epoch e is the set of bins its ranks read in e..e+preload. Sharded with unique
    keys, the bins of one full epoch are disjoint, so a window inside one full epoch is summed bin by bin;
    a window across a full-epoch boundary, and every window unsharded, is counted file by file.

    :param layout: ``(full_epoch_0idx, shard_index) -> (order, bounds)`` of the full epochs within
        ``num_epochs`` (e.g. a plan file's stored ones); default, and for preloads past them: ``plan.layout``

    >>> plan = ShardPlan(["a", "b", "c", "d"], [1, 10, 100, 1000],
    ...                  PlanSettings(num_shards=2, partition_epoch=2, seq_ordering="default"))
    >>> fp = compute_cache_footprint(plan, node_cache=NodeCache(ranks_per_node=2), num_epochs=2)
    >>> fp.held_bytes.tolist(), fp.shared_fs_bytes.tolist()  # epoch 2 preloads epoch 3: bins of full epoch 1
    ([[1111], [1111]], [[1111], [0]])
    >>> fp = compute_cache_footprint(plan, node_cache=NodeCache(ranks_per_node=2, constant_bytes=5), num_epochs=2)
    >>> fp.held_bytes.tolist(), fp.shared_fs_bytes.tolist()  # 5 bytes the sub-epoch dataset reads every time
    ([[1116], [1116]], [[1116], [0]])
    """
    check_int(num_epochs, name="num_epochs", minimum=1, hint="RETURNN's num_epochs counts sub-epochs")
    if not isinstance(node_cache, NodeCache):
        raise TypeError(f"node_cache={node_cache!r} must be a NodeCache, e.g. NodeCache(ranks_per_node=4)")
    num_stored_full = num_full_epochs_for(num_epochs, partition_epoch=plan.partition_epoch) if layout is not None else 0
    bins = _Bins(plan, layout=layout, num_stored_full=num_stored_full)
    num_shards = plan.num_shards
    num_nodes = node_cache.num_nodes(num_shards)
    preload = node_cache.preload_next_n_sub_epochs
    held_bytes = np.zeros((num_epochs, num_nodes), dtype=np.int64)
    held_files = np.zeros((num_epochs, num_nodes), dtype=np.int64)
    shared = np.zeros((num_epochs, num_nodes), dtype=np.int64)
    if not node_cache.cached_file:
        for e in range(1, num_epochs + 1):
            for n in range(num_nodes):
                ranks = node_cache.ranks_of(n, num_shards=num_shards)
                shared[e - 1, n] = sum(bins.bytes(bins.bin_id(e, r)) + node_cache.constant_bytes for r in ranks)
        return CacheFootprint(
            node_cache, num_shards, plan.partition_epoch, int(num_epochs), held_bytes, held_files, shared
        )
    previous: List[Optional[_Window]] = [None] * num_nodes
    for e in range(1, num_epochs + 1):
        for n in range(num_nodes):
            ranks = node_cache.ranks_of(n, num_shards=num_shards)
            window = _Window(bins, {bins.bin_id(j, r) for j in range(e, e + preload + 1) for r in ranks})
            held_bytes[e - 1, n], held_files[e - 1, n] = window.held()
            shared[e - 1, n] = window.new_bytes(previous[n])
            previous[n] = window
        bins.forget_before((e - 1) // plan.partition_epoch)
    held_bytes += node_cache.constant_bytes  # held by every node in every sub-epoch, read in the first
    shared[0] += node_cache.constant_bytes
    return CacheFootprint(node_cache, num_shards, plan.partition_epoch, int(num_epochs), held_bytes, held_files, shared)


BinId = Tuple[int, int, int]  # (full_epoch_0idx, layout index, bin index in the layout)


class _Bins:
    """The bins of a plan by id, with their files (as key ids) and bytes; layouts computed once each."""

    def __init__(self, plan: ShardPlan, *, layout: Optional[Layout], num_stored_full: int):
        self.plan = plan
        self.layout = layout
        self.num_stored_full = num_stored_full
        self.key_ids, self.key_costs = _key_ids(plan)
        #: bins of one full epoch are disjoint sets of files (sharded, every key once)
        self.disjoint = plan.settings.distrib_shard_files and self.key_ids is None
        self._layouts: Dict[Tuple[int, int], Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def bin_id(self, epoch: int, rank: int) -> BinId:
        k = (epoch - 1) // self.plan.partition_epoch
        return k, rank if self.plan.settings.num_layouts > 1 else 0, self.plan.bin_index(epoch=epoch, shard_index=rank)

    def _get(self, k: int, li: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        hit = self._layouts.get((k, li))
        if hit is None:
            if k < self.num_stored_full:
                order, bounds = self.layout(k, li)
            else:
                try:
                    order, bounds = self.plan.layout(full_epoch_0idx=k, shard_index=li)
                except ValueError as exc:  # a seed out of range: RETURNN fails there too, when it preloads
                    raise ValueError(
                        f"the sub-epoch datasets RETURNN creates ahead (preload_next_n_sub_epochs) "
                        f"need full epoch {k}, which it cannot shuffle: {exc}"
                    ) from None
            order = np.asarray(order, dtype=np.int64)
            bounds = np.asarray(bounds, dtype=np.int64)
            bin_bytes = np.add.reduceat(self.plan.costs[order], bounds[:-1]) if order.size else np.zeros(0, np.int64)
            hit = self._layouts[(k, li)] = (order, bounds, bin_bytes)
        return hit

    def forget_before(self, k: int) -> None:
        for key in [key for key in self._layouts if key[0] < k]:
            del self._layouts[key]

    def files(self, bin_id: BinId) -> np.ndarray:
        """Key ids of the bin's files (entry indices when every key is unique)."""
        order, bounds, _ = self._get(bin_id[0], bin_id[1])
        entries = order[bounds[bin_id[2]] : bounds[bin_id[2] + 1]]
        return entries if self.key_ids is None else self.key_ids[entries]

    def bytes(self, bin_id: BinId) -> int:
        """Bytes of the bin's entries (repeats of a key counted as often as they are listed)."""
        return int(self._get(bin_id[0], bin_id[1])[2][bin_id[2]])

    def count(self, bin_id: BinId) -> int:
        _, bounds, _ = self._get(bin_id[0], bin_id[1])
        return int(bounds[bin_id[2] + 1] - bounds[bin_id[2]])


class _Window:
    """The files a node holds at once: the union of some bins."""

    def __init__(self, bins: _Bins, ids: set):
        self.bins = bins
        self.ids = ids
        self.full_epochs = {b[0] for b in ids}
        self._distinct: Optional[np.ndarray] = None

    @property
    def summable(self) -> bool:
        """Whether the bins are disjoint, so that sums over bins count every file once."""
        return self.bins.disjoint and len(self.full_epochs) == 1

    def distinct(self) -> np.ndarray:
        """Sorted distinct key ids of the window's files."""
        if self._distinct is None:
            ids = np.sort(np.concatenate([self.bins.files(b) for b in sorted(self.ids)]))
            self._distinct = ids[np.concatenate(([True], ids[1:] != ids[:-1]))] if ids.size else ids
        return self._distinct

    def held(self) -> Tuple[int, int]:
        """``(bytes, files)`` held."""
        if self.summable:
            return sum(self.bins.bytes(b) for b in self.ids), sum(self.bins.count(b) for b in self.ids)
        d = self.distinct()
        return int(self.bins.key_costs[d].sum()), int(d.size)

    def new_bytes(self, previous: Optional["_Window"]) -> int:
        """Bytes of the files held here but not in ``previous`` (all of them if there is none)."""
        if previous is None:
            return self.held()[0]
        if self.summable and previous.summable and self.full_epochs == previous.full_epochs:
            return sum(self.bins.bytes(b) for b in self.ids - previous.ids)
        d, p = self.distinct(), previous.distinct()
        pos = np.searchsorted(p, d)
        found = np.zeros(d.size, dtype=bool)
        inside = pos < p.size
        found[inside] = p[pos[inside]] == d[inside]
        return int(self.bins.key_costs[d[~found]].sum())


def partition_epoch_candidates(
    *,
    num_files: int,
    settings: PlanSettings,
    cache_size: int,
    total_bytes: int,
    node_cache: NodeCache,
    max_candidates: int = 8,
) -> List[int]:
    """``partition_epoch`` values worth checking against ``cache_size``: the plan's own, the smallest the
    mean bin size suggests (``ranks_per_node * (preload + 1) * total / (num_bins per partition_epoch * P)
    <= cache_size``) and a few above it, round values around it, and the largest the files allow (sorted).

    >>> s = PlanSettings(num_shards=8, partition_epoch=20)
    >>> partition_epoch_candidates(num_files=100_000, settings=s, cache_size=10**11, total_bytes=10**12,
    ...                            node_cache=NodeCache(ranks_per_node=4))  # estimate: 4 * 2 * 10**12 / (8 * 10**11)
    [2, 5, 10, 11, 12, 20, 50, 100]
    """
    per_p = settings.num_bins // settings.partition_epoch  # bins per unit of partition_epoch: num_shards or 1
    max_p = max(1, int(num_files) // per_p)
    held_ranks = min(node_cache.ranks_per_node, settings.num_shards) * (node_cache.preload_next_n_sub_epochs + 1)
    estimate = max(1, math.ceil(held_ranks * int(total_bytes) / (per_p * max(int(cache_size), 1))))
    near = {estimate, math.ceil(estimate * 1.04), math.ceil(estimate * 1.12), math.ceil(estimate * 1.2)}
    round_values = [m * 10**d for d in range(0, 10) for m in (1, 2, 5)]
    below = [p for p in round_values if p < min(estimate, max_p)][-2:]  # to show where it stops fitting
    above = [p for p in round_values if p > estimate][:3]
    values = sorted(p for p in {settings.partition_epoch, max_p, *near, *below, *above} if 1 <= p <= max_p)
    if len(values) > max_candidates:  # keep the plan's own and those nearest to the estimate
        keep = sorted(values, key=lambda p: (p != settings.partition_epoch, abs(math.log(p / estimate))))
        values = sorted(keep[:max_candidates])
    return values


def partition_epochs_fitting(
    plan: ShardPlan, *, node_cache: NodeCache, cache_size: int, candidates: Sequence[int], num_full_epochs: int = 3
) -> List[Dict[str, object]]:
    """For each candidate ``partition_epoch``: the peak bytes a node holds (the same files and other settings,
    over the first ``num_full_epochs`` full epochs; the bins' sizes are alike in every full epoch) and
    whether it fits ``cache_size`` bytes. Candidates the files cannot fill are reported with the reason.

    >>> plan = ShardPlan(list("abcdefgh"), [10] * 8, PlanSettings(num_shards=2, partition_epoch=1))
    >>> rows = partition_epochs_fitting(plan, node_cache=NodeCache(ranks_per_node=2), cache_size=45,
    ...                                 candidates=[1, 2, 4, 5])
    >>> [(r["partition_epoch"], r.get("peak_bytes"), r.get("fits")) for r in rows]  # 5: too few files
    [(1, 80, False), (2, 80, False), (4, 40, True), (5, None, None)]
    """
    check_int(cache_size, name="cache_size", minimum=1, hint="bytes of the node's local cache")
    check_int(num_full_epochs, name="num_full_epochs", minimum=1)
    out: List[Dict[str, object]] = []
    for p in sorted(set(int(check_int(c, name="partition_epoch candidate", minimum=1)) for c in candidates)):
        try:
            other = plan.with_settings(partition_epoch=p, num_epochs=p * num_full_epochs)
        except ValueError as exc:
            out.append({"partition_epoch": p, "not_applicable": str(exc)})
            continue
        fp = compute_cache_footprint(other, node_cache=node_cache, num_epochs=p * num_full_epochs)
        out.append({"partition_epoch": p, "peak_bytes": fp.peak_bytes, "fits": fp.peak_bytes <= cache_size})
    return out


def partition_epoch_fits(
    plan: ShardPlan, *, node_cache: NodeCache, cache_size: int, num_full_epochs: int = 3, max_refine: int = 4
) -> List[Dict[str, object]]:
    """:func:`partition_epochs_fitting` for the :func:`partition_epoch_candidates`, then up to ``max_refine``
    more values halving the gap between the largest value that does not fit below the smallest that does
    and that one (the peak shrinks with partition_epoch, though not strictly), sorted by partition_epoch.

    >>> plan = ShardPlan([f"f{i}" for i in range(640)], [100] * 640, PlanSettings(num_shards=2, partition_epoch=1))
    >>> rows = partition_epoch_fits(plan, node_cache=NodeCache(ranks_per_node=2), cache_size=7000)
    >>> [(r["partition_epoch"], r["peak_bytes"]) for r in rows if 17 <= r["partition_epoch"] <= 19]  # refined
    [(17, 7600), (18, 7200), (19, 6800)]
    """
    candidates = partition_epoch_candidates(
        num_files=plan.num_files,
        settings=plan.settings,
        cache_size=cache_size,
        total_bytes=int(plan.costs.sum()),
        node_cache=node_cache,
    )
    rows = {
        r["partition_epoch"]: r
        for r in partition_epochs_fitting(
            plan, node_cache=node_cache, cache_size=cache_size, candidates=candidates, num_full_epochs=num_full_epochs
        )
    }
    for _ in range(max_refine):
        fitting = [p for p, r in rows.items() if r.get("fits")]
        if not fitting:
            break
        smallest = min(fitting)
        below = [p for p, r in rows.items() if r.get("fits") is False and p < smallest]
        if not below or smallest - max(below) < 2:
            break
        middle = (max(below) + smallest) // 2
        rows.update(
            {
                r["partition_epoch"]: r
                for r in partition_epochs_fitting(
                    plan,
                    node_cache=node_cache,
                    cache_size=cache_size,
                    candidates=[middle],
                    num_full_epochs=num_full_epochs,
                )
            }
        )
    return [rows[p] for p in sorted(rows)]


_UNITS = {
    "": 1,
    "B": 1,
    "K": 2**10,
    "KB": 10**3,
    "KIB": 2**10,
    "M": 2**20,
    "MB": 10**6,
    "MIB": 2**20,
    "G": 2**30,
    "GB": 10**9,
    "GIB": 2**30,
    "T": 2**40,
    "TB": 10**12,
    "TIB": 2**40,
    "P": 2**50,
    "PB": 10**15,
    "PIB": 2**50,
}


def parse_bytes(text: str, *, what: str = "cache size") -> int:
    """A byte count from text: an int, or a number with a unit (binary ``K``/``KiB``.. ``P``/``PiB``;
    decimal ``KB``.. ``PB``), case-insensitive.

    :param what: the value's name in the messages

    >>> parse_bytes("1.5T"), parse_bytes("800GB"), parse_bytes("4096")
    (1649267441664, 800000000000, 4096)
    >>> parse_bytes("ten GB")
    Traceback (most recent call last):
    ...
    ValueError: cache size 'ten GB' is not a byte count; write e.g. 800G (binary units K, M, G, T, P or KiB..PiB) or 800GB (decimal)
    """
    s = str(text).strip().upper().replace(" ", "")
    num = s.rstrip("KMGTPIB")
    unit = s[len(num) :]
    try:
        value = float(num) if num else float("nan")
    except ValueError:
        value = float("nan")
    if unit not in _UNITS or not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{what} {text!r} is not a byte count; write e.g. 800G (binary units K, M, G, T, P or "
            "KiB..PiB) or 800GB (decimal)"
        )
    size = value * _UNITS[unit]
    if not math.isfinite(size) or size >= 2**63:
        raise ValueError(
            f"{what} {text!r} is more bytes than a cache can hold (at most 2**63 - 1, about 8 EiB); "
            "give the node cache's real size, e.g. 800G"
        )
    return int(round(size))
