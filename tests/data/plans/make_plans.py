"""Wrote the stored plans next to this script, once; they pin the bins of each distribution and stay as
they are (tests/core/io/test_stored_plans.py). Kept to show how they were made, not to be run again:

    PYTHONPATH=<i6_shard checkout> python tests/data/plans/make_plans.py <format>

format 1 was written by the i6_shard before plan format 2 (git 90d3495), format 2 by the one that added it;
format2_flexible_auto.npz by the one that added that distribution (the others were not written again).
"""

import os
import sys

from i6_shard.core import PlanSettings, ShardPlan, save_plan
from i6_shard.core.pure.cut import CUTS

KEYS = [f"/data/corpus/part-{i:02d}.hdf" for i in range(14)]
SIZES = [5, 900, 33, 7, 410, 120, 64, 2000, 15, 260, 48, 730, 9, 1500]
SETTINGS = dict(num_shards=2, partition_epoch=3, num_epochs=7, random_seed_offset=3)

if __name__ == "__main__":
    fmt = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    for distribution in CUTS:
        plan = ShardPlan(KEYS, SIZES, PlanSettings(distribution=distribution, **SETTINGS))
        save_plan(plan, os.path.join(here, f"format{fmt}_{distribution}.npz"))
    if fmt == "1":  # unsharded too, from the format without per-epoch reads
        plan = ShardPlan(KEYS, SIZES, PlanSettings.from_mode(sharding="unsharded", **SETTINGS))
        save_plan(plan, os.path.join(here, f"format{fmt}_returnn_unsharded.npz"))
