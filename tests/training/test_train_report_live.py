"""The training report on a training run here (2 ranks, torchrun, gloo, CPU, behavior_version 33):
the dropped share per sub-epoch equals a count from the batch lines and the HDF files, and every rank
read the files of a plan made with core for the same files and settings."""

import os
import re

from i6_shard import core
from i6_shard.core.reporting.train_report import write_train_report

from .conftest import SHARED
from .harness import hdf_seq_lengths


def test_report_of_a_real_training(two_rank_training, tmp_path):
    t = two_rank_training
    keys = [f"data/part{i:03d}.hdf" for i in range(SHARED["num_files"])]
    sizes = core.collect_file_sizes([os.path.join(t.work_dir, k) for k in keys])
    plan = core.ShardPlan(
        keys,
        sizes.sizes,
        core.PlanSettings(num_shards=2, partition_epoch=SHARED["partition_epoch"], num_epochs=SHARED["num_epochs"]),
    )
    plan_path = str(tmp_path / "plan.npz")
    core.save_plan(plan, plan_path)
    summary = write_train_report(t.log_files, str(tmp_path / "report"), plan_path=plan_path)  # HDF read from cwd

    frames = {k: int(hdf_seq_lengths(os.path.join(t.work_dir, k)).sum()) for k in keys}
    consumed, available = {}, {}
    for rank in range(2):
        text = t.log_text(rank)
        for m in re.finditer(r"^ep (\d+) train, step \d+, .*?sum_size:\S+ (\d+)", text, flags=re.M):
            consumed[int(m[1])] = consumed.get(int(m[1]), 0) + int(m[2])
        for m in re.finditer(r"using files for epoch (\d+): \[(.*)\]$", text, flags=re.M):
            available[int(m[1])] = available.get(int(m[1]), 0) + sum(frames[k] for k in re.findall(r"'([^']+)'", m[2]))
    assert [s["epoch"] for s in summary["sub_epochs"]] == list(range(1, SHARED["num_epochs"] + 1))
    for s in summary["sub_epochs"]:
        assert abs(s["dropped_fraction"] - (1 - consumed[s["epoch"]] / available[s["epoch"]])) < 0.001
        assert [x["files_match_plan"] for x in s["ranks"]] == [True, True]
        assert s["steps_ratio"] == 1.0
    assert summary["complete_is_mean"] is True
    assert not [a for a in summary["alarms"] if "#1738" in a or "than planned" in a]
    assert (tmp_path / "report" / "plot.png").stat().st_size > 0
