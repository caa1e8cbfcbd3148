"""Finding a dataset object inside RETURNN's wrapper datasets, by the reader's key path: shared by the verify runner
and what it records in each reading process."""

from __future__ import annotations

from typing import Any, Sequence


def locate_dataset(dataset, key_path: Sequence[Any]):
    """The dataset object at ``key_path`` (the reader's, below the config key) inside wrapper objects:
    ``datasets`` of MetaDataset/CombinedDataset/ConcatDataset, else the one wrapped dataset."""
    for key in key_path:
        if isinstance(dataset, (dict, list)):
            dataset = dataset[key]
        elif key == "datasets":
            dataset = dataset.datasets
        else:
            inner = next(
                (
                    getattr(dataset, a)
                    for a in ("_dataset", "dataset", "sub_dataset")
                    if hasattr(getattr(dataset, a, None), "init_seq_order")
                ),
                None,
            )
            if inner is None:
                raise RuntimeError(
                    f"cannot reach the dataset {key!r} inside {dataset} in this process (a "
                    "MultiProcDataset builds it in its workers); verify the DistributeFilesDataset dict "
                    "itself, with the config's settings"
                )
            dataset = inner
    return dataset
