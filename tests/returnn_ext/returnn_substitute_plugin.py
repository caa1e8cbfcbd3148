"""pytest plugin for RETURNN's own test files: with ``I6_SHARD_SUBSTITUTE_DFD=1`` it puts i6_shard's
ShardedDistributeFilesDataset where RETURNN's DistributeFilesDataset is looked up (the module attribute
that ``from returnn.datasets.distrib_files import DistributeFilesDataset`` reads, and the class registry
behind ``"class": "DistributeFilesDataset"``)."""

import os


def pytest_configure(config):
    if os.environ.get("I6_SHARD_SUBSTITUTE_DFD") != "1":
        return
    import returnn.datasets.basic as basic
    import returnn.datasets.distrib_files as distrib_files

    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    distrib_files.DistributeFilesDataset = ShardedDistributeFilesDataset
    basic.get_dataset_class("HDFDataset")  # fills the registry (it scans the modules once) ...
    basic._dataset_classes["DistributeFilesDataset"] = ShardedDistributeFilesDataset  # ... then override
    assert basic.get_dataset_class("DistributeFilesDataset") is ShardedDistributeFilesDataset
