"""Wrote the stored plans next to this script, once; they pin the bins of each distribution and stay as
they are (tests/core/io/test_stored_plans.py). Kept to show how they were made, not to be run again:

    PYTHONPATH=<i6_shard checkout> python tests/data/plans/make_plans.py <format>

format 1 was written by the i6_shard before plan format 2 (git 90d3495), format 2 by the one that added it;
format2_flexible_auto.npz by the one that added that distribution (the others were not written again), and
format2_equal_steps.npz by the one that added "equal_steps", which cuts with the files' sequence lengths
(:data:`LENGTHS`) under an engine (:data:`EQUAL_STEPS_ENGINE`): :func:`plan_of` gives them. A distribution whose
version (``CUTS[name].version``) was raised gets a plan of the new version next to the old ones (:func:`stored_name`:
format2_equal_steps_v2.npz, written with ``python tests/data/plans/make_plans.py 2 equal_steps`` by the i6_shard
that searches lossy full epochs again; format2_balanced_v2, format2_flexible_v2, format2_flexible_auto_v2 and
format2_equal_steps_v3.npz with ``python tests/data/plans/make_plans.py 2 balanced flexible flexible_auto equal_steps``
by the i6_shard that draws the order of the ranks in each sub-epoch).
"""

import os
import sys

import numpy as np

from i6_shard.core import PlanSettings, ShardPlan, save_plan
from i6_shard.core.pure.cut import CUTS
from i6_shard.core.pure.equal_steps_cut import EqualStepsInputs
from i6_shard.core.pure.engine_sim import EngineSettings

KEYS = [f"/data/corpus/part-{i:02d}.hdf" for i in range(14)]
SIZES = [5, 900, 33, 7, 410, 120, 64, 2000, 15, 260, 48, 730, 9, 1500]
SETTINGS = dict(num_shards=2, partition_epoch=3, num_epochs=7, random_seed_offset=3)
#: Each file's sequence lengths and the engine "equal_steps" cuts with.
LENGTHS = [
    [7], [9, 26, 6, 28, 32, 9, 16, 17, 21, 12, 31, 5, 38, 23, 12], [38], [23], [10, 10, 35, 7, 21, 9], [2, 21], [20],
    [2, 16, 5, 27, 7, 29, 6, 34, 21, 5, 10, 10, 21, 38, 39, 33, 8, 29, 12, 34, 19, 14, 25, 37, 26, 27, 18, 6, 30, 6,
     19, 12, 7], [13], [30, 4, 9, 26], [13], [16, 34, 37, 21, 14, 9, 25, 10, 24, 12, 15, 4], [32],
    [16, 21, 21, 34, 11, 20, 22, 13, 33, 24, 21, 25, 16, 20, 29, 33, 20, 18, 26, 23, 35, 13, 11, 25, 32],
]  # fmt: skip
EQUAL_STEPS_ENGINE = EngineSettings(batch_size=60, max_seqs=4)


def plan_of(settings: PlanSettings) -> ShardPlan:
    """The stored plans' ShardPlan under ``settings`` (for "equal_steps" with :data:`LENGTHS` and the engine)."""
    inputs = EqualStepsInputs([np.array(x) for x in LENGTHS], EQUAL_STEPS_ENGINE)
    return ShardPlan(
        KEYS, SIZES, settings, equal_steps=inputs if CUTS[settings.distribution].cuts_with_inputs else None
    )


def stored_name(distribution: str, fmt: str = "2") -> str:
    """The pinned plan of the distribution's current version: ``format<fmt>_<distribution>`` at version 1, with
    ``_v<version>`` after (the plans of older versions stay, under their names)."""
    version = CUTS[distribution].version
    return f"format{fmt}_{distribution}" + ("" if version == 1 else f"_v{version}")


if __name__ == "__main__":
    fmt = sys.argv[1]  # then the distributions to write (default: all)
    here = os.path.dirname(os.path.abspath(__file__))
    for distribution in sys.argv[2:] or CUTS:
        plan = plan_of(PlanSettings(distribution=distribution, **SETTINGS))
        save_plan(plan, os.path.join(here, stored_name(distribution, fmt) + ".npz"))
    if fmt == "1":  # unsharded too, from the format without per-epoch reads
        plan = ShardPlan(KEYS, SIZES, PlanSettings.from_mode(sharding="unsharded", **SETTINGS))
        save_plan(plan, os.path.join(here, f"format{fmt}_returnn_unsharded.npz"))
