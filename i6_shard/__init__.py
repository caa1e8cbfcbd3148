"""i6_shard: plan, check and configure file-level sharding for RETURNN's
DistributeFilesDataset, as Sisyphus jobs, config builders and a CLI."""

__version__ = "0.1.0"
