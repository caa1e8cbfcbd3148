"""The sub-epoch dataset dict, as far as it can be told before RETURNN runs: what
``DistributeFilesDataset._get_sub_dataset_dict`` gets from ``get_sub_epoch_dataset`` (i6_shard's bound
function's template, or a user function called with the first file)."""

from __future__ import annotations

import functools
from typing import Any, List, Mapping, Optional

from ..sub_epoch import is_sub_epoch_partial


def sub_epoch_partial(value: Any) -> Optional[functools.partial]:
    """i6_shard's bound ``get_sub_epoch_dataset`` behind ``value`` (also inside i6_core wrappers that
    keep it as ``sub_epoch_partial``), else None."""
    if is_sub_epoch_partial(value):
        return value
    inner = getattr(value, "sub_epoch_partial", None)
    return inner if is_sub_epoch_partial(inner) else None


def _sub_epoch_dataset(dataset: Mapping[str, Any], notes: List[str]) -> Optional[Mapping[str, Any]]:
    """What ``get_sub_epoch_dataset`` returns, as far as it can be told before RETURNN runs: the
    template of i6_shard's bound function, or a user function called with the first inline file."""
    func = dataset.get("get_sub_epoch_dataset")
    partial = sub_epoch_partial(func)
    if partial is not None:
        return partial.keywords["template"]
    files = dataset.get("files")
    if callable(func) and isinstance(files, list) and files:
        try:
            out = func([files[0]])
        except Exception as exc:  # noqa: BLE001 -- user code; RETURNN would call it the same way
            notes.append(f"get_sub_epoch_dataset([first file]) raised {type(exc).__name__}: {exc}")
            return None
        if isinstance(out, Mapping):
            return out
        notes.append(f"get_sub_epoch_dataset returned a {type(out).__name__}, not a dataset dict")
        return None
    notes.append(
        "the sub-epoch dataset dict cannot be told before RETURNN runs (get_sub_epoch_dataset is not "
        "i6_shard's bound function and files are not inline)"
    )
    return None


#: Options of RETURNN datasets that name the files they read.
_FILE_KEYS = ("files", "file", "path", "filename")


def _sub_from_user_function(dataset: Mapping[str, Any]) -> bool:
    """Whether the sub-epoch dict came from a user function called with the first file (not a template)."""
    return sub_epoch_partial(dataset.get("get_sub_epoch_dataset")) is None
