"""Sisyphus jobs of i6_shard (need the real Sisyphus, github.com/rwth-i6/sisyphus): file sizes and costs,
shard plan and sharding verification as cached, hashable outputs."""

from .costs import ComputeFileCostsJob
from .plan import ShardPlanJob
from .sizes import ComputeFileSizesJob
from .train_report import TrainReportJob
from .verify import VerifyShardingJob

__all__ = ["ComputeFileCostsJob", "ComputeFileSizesJob", "ShardPlanJob", "TrainReportJob", "VerifyShardingJob"]
