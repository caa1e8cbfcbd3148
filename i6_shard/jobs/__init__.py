"""Sisyphus jobs of i6_shard (need the real Sisyphus, github.com/rwth-i6/sisyphus): file sizes,
shard plan and sharding verification as cached, hashable outputs."""

from .plan import ShardPlanJob
from .sizes import ComputeFileSizesJob
from .train_report import TrainReportJob
from .verify import VerifyShardingJob

__all__ = ["ComputeFileSizesJob", "ShardPlanJob", "TrainReportJob", "VerifyShardingJob"]
