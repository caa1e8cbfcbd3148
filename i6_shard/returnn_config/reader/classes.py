"""Which class a dataset dict names, as RETURNN's ``init_dataset`` resolves its ``"class"``
(``returnn.datasets.basic.get_dataset_class``): a name, a class object, i6_core's ``CodeWrapper`` or
an :class:`~i6_shard.returnn_config.pycode.ImportRef`; and whether it is a DistributeFilesDataset
(a subclass too) or i6_shard's own."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..pycode import ImportRef

_DFD_CLASS_NAMES = ("DistributeFilesDataset", "ShardedDistributeFilesDataset")


def dataset_class_name(cls: Any) -> Optional[str]:
    """The class name of a dataset dict's ``"class"``: a str, a class object, or i6_core's
    ``CodeWrapper`` (its code's last dotted part); None if it cannot be told.

    >>> dataset_class_name("returnn.datasets.distrib_files.DistributeFilesDataset")
    'DistributeFilesDataset'
    """
    if isinstance(cls, str):
        return cls.rsplit(".", 1)[-1]
    if isinstance(cls, type):
        return cls.__name__
    if isinstance(cls, ImportRef):
        return cls.qualname.rsplit(".", 1)[-1]
    code = getattr(cls, "code", None)  # i6_core CodeWrapper
    if isinstance(code, str):
        return code.rsplit(".", 1)[-1]
    return None


def _is_dfd_class(cls: Any) -> bool:
    if isinstance(cls, type):
        return any(c.__name__ in _DFD_CLASS_NAMES for c in cls.__mro__)
    name = dataset_class_name(cls)
    return bool(name) and name.endswith(_DFD_CLASS_NAMES)


def is_distribute_files_dataset(dataset: Any) -> bool:
    """Whether a dataset dict is a DistributeFilesDataset (its class, a subclass, i6_shard's, or a
    dict with ``get_sub_epoch_dataset``, which only that class takes).

    >>> is_distribute_files_dataset({"class": "HDFDataset", "files": ["a.hdf"]})
    False
    """
    if not isinstance(dataset, Mapping):
        return False
    return _is_dfd_class(dataset.get("class")) or "get_sub_epoch_dataset" in dataset


def _is_i6_shard_class(cls: Any) -> bool:
    if isinstance(cls, type):
        return any(
            c.__name__ == "ShardedDistributeFilesDataset" and c.__module__.startswith("i6_shard.") for c in cls.__mro__
        )
    if isinstance(cls, ImportRef):
        return cls.module.startswith("i6_shard.") and cls.qualname == "ShardedDistributeFilesDataset"
    return dataset_class_name(cls) == "ShardedDistributeFilesDataset"
