"""What a dataset is built with besides its own options: ``init_dataset``'s ``default_kwargs`` and what a
parent passes on (``_dataset_extend_default_kwargs_from_parent_dataset``), and the seed and shards a dataset ends
up with (``Dataset.__init__``: its own option, else the parent's, else ``_get_default_random_seed_offset``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Tuple

from .rules import SeedRule, ShardRule

if TYPE_CHECKING:
    from .context import _Context


@dataclass(frozen=True)
class _Given:
    """What a dataset is constructed with besides its own options (its options win):
    ``init_dataset``'s ``default_kwargs`` and ``_dataset_extend_default_kwargs_from_parent_dataset``."""

    defaults: Mapping[str, Any]
    seed: Optional[SeedRule]
    shards: Optional[ShardRule]
    wrappers: Tuple[str, ...]
    role: str
    fails: Optional[str] = None
    behavior_version: Optional[int] = None  # where it is built (None: the config's)
    process: str = "main process"
    epoch_multiplier: int = 1


def _own_seed(
    dataset: Mapping[str, Any], given: _Given, ctx: _Context, *, custom_sharding: bool, path: Tuple[Any, ...]
) -> SeedRule:
    """``Dataset.random_seed_offset``: the value it was constructed with (its own option, else the
    parent's ``random_seed_offset``), else ``_get_default_random_seed_offset``."""
    if "random_seed_offset" in dataset:  # also None: then the parent's does not apply (setdefault)
        value = dataset["random_seed_offset"]
        if value is None:
            return ctx.default_seed(custom_sharding=custom_sharding, where="default")
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{_name(path)}: random_seed_offset={value!r} must be an int")
        return SeedRule(value, 0, "dataset")
    if given.seed is not None:
        return given.seed
    return ctx.default_seed(custom_sharding=custom_sharding, where="default")


def _own_shards(dataset: Mapping[str, Any], given: _Given, path: Tuple[Any, ...]) -> ShardRule:
    """``_num_shards``/``_shard_index``: its own options, else the parent's, else ``(1, 0)``."""
    if "_num_shards" in dataset or "_shard_index" in dataset:
        num, idx = dataset.get("_num_shards", 1), dataset.get("_shard_index", 0)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (num, idx)) or not 0 <= idx < num:
            raise ValueError(
                f"{_name(path)}: _num_shards={num!r}, _shard_index={idx!r}; RETURNN needs ints with "
                "0 <= _shard_index < _num_shards"
            )
        return ShardRule(per_rank=False, fixed=(num, idx), source="dataset")
    return given.shards or ShardRule(per_rank=False)


def _name(path: Tuple[Any, ...]) -> str:
    return ".".join(map(str, path)) or "dataset"
