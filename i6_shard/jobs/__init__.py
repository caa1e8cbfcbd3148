"""Sisyphus jobs of i6_shard (need the real Sisyphus, github.com/rwth-i6/sisyphus): file sizes and costs,
shard plan, sharding verification and re-chunked HDF corpora as cached, hashable outputs."""

from .costs import ComputeFileCostsJob
from .plan import ShardPlanJob
from .rechunk import RechunkHdfJob
from .sizes import ComputeFileSizesJob
from .train_report import TrainReportJob
from .verify import VerifyShardingJob

__all__ = [
    "ComputeFileCostsJob",
    "ComputeFileSizesJob",
    "ShardPlanJob",
    "RechunkHdfJob",
    "TrainReportJob",
    "VerifyShardingJob",
]
