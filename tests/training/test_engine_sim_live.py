"""The plan's exact steps in real 2-rank RETURNN trainings (torchrun, gloo, CPU): every rank's ``steps_taken`` in
``summary.json`` (the simulated engine, :mod:`i6_shard.core.pure.engine_sim`) equals the steps RETURNN's own log
says it trained ("Trained N steps") in every sub-epoch, and the predicted drop equals the measured one, under grad
sync, under param sync with and without gradient accumulation, and under sync levels stated in the plan. The same
trainings (one per setting, shared by the tests) show how RETURNN's control sync stops the ranks under grad and
param sync.

The DataLoader reads in each rank's own process (``num_workers=0``): the steps, the control sync and the drop are the
rank's, and a DataLoader worker per rank (a fresh Python importing torch and RETURNN) would add a third of each
training's time; the dataset read through the engine's DataLoader worker is tested in test_engine_live.py."""

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

from tests.deps import needs_torch

NUM_RANKS, NUM_FILES, PARTITION_EPOCH, NUM_EPOCHS, BATCH_SIZE, MAX_SEQS = 2, 12, 2, 4, 150, 4
#: The DataLoader reads in the rank's process (see the module's docstring).
IN_PROCESS = {"torch_dataloader_opts": {"num_workers": 0}}


def plan_and_train(
    work: str,
    *,
    seed: int,
    torch_distributed: Optional[Dict[str, Any]] = None,
    accum: int = 1,
    behavior_version: int = 31,
    plan_options: List[str] = (),
) -> Dict[str, Any]:
    """Skewed HDF files, a frames costs archive, a balanced plan of it made by ``i6_shard plan`` (with the batching
    and ``plan_options``), and a training of that plan; returns the plan's summary, the plan, the file lengths and
    per (sub-epoch, rank) the logged steps and the frames consumed (from the logged batch sizes)."""
    from i6_shard import core
    from i6_shard.cli import main
    from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs
    from i6_shard.core.io.returnn_log import read_training_logs
    from .harness import hdf_files_dataset, hdf_seq_lengths, run_training, write_skewed_hdf_files

    paths = write_skewed_hdf_files(os.path.join(work, "run", "data"), num_files=NUM_FILES, seed=seed)
    keys = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]
    archive = os.path.join(work, "frames.npz")
    save_file_costs(dataclasses.replace(collect_file_costs(paths, unit="frames", num_procs=1), keys=keys), archive)
    plan_dir = os.path.join(work, "plan")
    options = ["--num-shards", str(NUM_RANKS), "--partition-epoch", str(PARTITION_EPOCH), "--num-epochs"]
    options += [str(NUM_EPOCHS), "--distribution", "balanced", "--batch-size", str(BATCH_SIZE), "--max-seqs"]
    options += [str(MAX_SEQS), "--no-plot", *plan_options]
    assert main(["plan", "--sizes", archive, *options, "-o", plan_dir]) == 0
    with open(os.path.join(plan_dir, "summary.json")) as f:
        summary = json.load(f)
    train = hdf_files_dataset(
        keys, num_shards=NUM_RANKS, partition_epoch=PARTITION_EPOCH, distribution="balanced", file_sizes=archive
    )
    training = run_training(
        os.path.join(work, "run"),
        train=train,
        num_ranks=NUM_RANKS,
        num_epochs=NUM_EPOCHS,
        batch_size=BATCH_SIZE,
        max_seqs=MAX_SEQS,
        behavior_version=behavior_version,
        torch_distributed={"backend": "gloo", **(torch_distributed or {})},
        extra_config={**IN_PROCESS, **({"accum_grad_multiple_step": accum} if accum != 1 else {})},
    )
    logs = read_training_logs(training.log_files)
    lengths = {k: hdf_seq_lengths(p) for k, p in zip(keys, paths)}
    logged, consumed, total = [], [], []
    for epoch in range(1, NUM_EPOCHS + 1):
        recs = [logs.ranks[r].sub_epochs[epoch] for r in range(NUM_RANKS)]
        assert all(rec.finished for rec in recs), epoch
        logged.append([int(rec.trained_steps) for rec in recs])
        consumed.append([int(np.sum(rec.step_frames)) for rec in recs])
        total.append([int(sum(lengths[k].sum() for k in rec.file_keys)) for rec in recs])
    return {
        "summary": summary,
        "plan": core.load_plan(os.path.join(plan_dir, "plan.npz")),
        "file_lengths": [lengths[k] for k in keys],
        "logged_steps": logged,
        "frames_consumed": consumed,
        "frames_total": total,
        "seconds": training.seconds,
        "log_files": training.log_files,
        "plan_dir": plan_dir,
    }


def measured_drop(result: Dict[str, Any]) -> float:
    """Mean over the sub-epochs of 1 - consumed / available frames, from the logs."""
    return float(np.mean([1 - sum(c) / sum(t) for c, t in zip(result["frames_consumed"], result["frames_total"])]))


LEVELS = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]}
PARAM3 = ["--reduce-type", "param", "--param-sync-step", "3"]
#: The trainings of this module, each made once and checked by the tests that need it:
#: name -> (torch_distributed, accum_grad_multiple_step, plan options).
CASES = {
    "grad": ({}, 1, []),
    "param3": ({"reduce_type": "param", "param_sync_step": 3}, 1, PARAM3),
    "param3_accum2": ({"reduce_type": "param", "param_sync_step": 3}, 2, PARAM3 + ["--accum-grad-multiple-step", "2"]),
    # sync levels, stated in the plan as in the config: a node grad level (one host: both ranks) under a world
    # param level, so every rank stops in the step the first runs out (read as param sync before levels were planned)
    "levels": (
        LEVELS,
        1,
        ["--torch-distributed", json.dumps(LEVELS), "--ranks-per-node", str(NUM_RANKS)],
    ),
    "param1000": (
        {"reduce_type": "param", "param_sync_step": 1000},
        1,
        ["--reduce-type", "param", "--param-sync-step", "1000"],
    ),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``trained(name)``: the :func:`plan_and_train` result of the case (seed 3), trained on first use."""
    needs_torch("the training needs torch")
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn dm-tree")
    pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")
    results = {}

    def get(name: str) -> Dict[str, Any]:
        if name not in results:
            torch_distributed, accum, plan_options = CASES[name]
            work = str(tmp_path_factory.mktemp(name))
            results[name] = plan_and_train(
                work, seed=3, torch_distributed=torch_distributed, accum=accum, plan_options=plan_options
            )
        return results[name]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", ["grad", "param3", "param3_accum2", "levels"])
def test_plan_steps_taken_equal_returnns_logged_steps(trained, name, tmp_path):
    result = trained(name)
    summary = result["summary"]
    assert summary["batching"]["simulation"]["exact"]
    assert summary["steps_taken"] == result["logged_steps"]
    # the drop is not vacuous: some sub-epoch loses data, and the plan says exactly how much
    assert measured_drop(result) > 0
    assert summary["dropped_fraction_predicted"] == pytest.approx(measured_drop(result), abs=2e-6)
    check_train_report_against_the_plan(tmp_path, result)


def check_train_report_against_the_plan(tmp_path, result: Dict[str, Any]) -> None:
    """``train-report --plan DIR`` of the training finds no step or drop other than planned; with one rank's
    ``steps_taken`` edited in the plan's summary.json it flags exactly that (sub-epoch, rank) and fails."""
    import shutil

    from i6_shard.cli import main

    argv = ["train-report", *result["log_files"], "--plan", result["plan_dir"], "--no-plot", "--fail-on-alarm"]
    if main(argv + ["-o", str(tmp_path / "report")]) != 0:  # (alarms other than the plan's are not this test's)
        alarms = json.loads((tmp_path / "report" / "summary.json").read_text())["alarms"]
        assert not [a for a in alarms if "differ" in a and "from the plan" in a], alarms
    planned = json.loads((tmp_path / "report" / "summary.json").read_text())["planned_steps"]
    assert (planned["exact"], planned["differences"], planned["drop_differences"]) == (True, 0, 0)
    assert planned["compared_records"] == NUM_EPOCHS * NUM_RANKS
    edited = str(tmp_path / "plan_edited")
    shutil.copytree(result["plan_dir"], edited)
    summary = dict(result["summary"], steps_taken=[list(row) for row in result["summary"]["steps_taken"]])
    summary["steps_taken"][1][0] += 1
    with open(os.path.join(edited, "summary.json"), "w") as f:
        json.dump(summary, f)
    argv[argv.index(result["plan_dir"])] = edited
    assert main(argv + ["-o", str(tmp_path / "report_edited")]) == 1
    alarms = json.loads((tmp_path / "report_edited" / "summary.json").read_text())["alarms"]
    step_alarms = [a for a in alarms if a.startswith("steps differ from the plan")]
    assert len(step_alarms) == 1
    assert f"sub-epoch 2 rank 0: planned {summary['steps_taken'][1][0]} steps" in step_alarms[0]
    assert f"logged {result['logged_steps'][1][0]}" in step_alarms[0]


@pytest.mark.slow
@pytest.mark.parametrize("name, sync_every", [("grad", 1), ("param3", 3), ("param1000", 1000)])
def test_param_sync_runs_the_ranks_on_to_their_next_sync(trained, name, sync_every):
    """Grad sync stops every rank in the step the first runs out; param sync every P steps lets the others
    run on to their next control sync (with P beyond every rank's steps, nothing is dropped); the drop
    model (core.pure.batching.sync_stop) follows RETURNN's control sync. Judged on RETURNN's logs alone: the steps
    each rank logged, the frames of its logged batches and the frames of the files it logged."""
    from i6_shard.core.pure.batching import sync_stop

    result = trained(name)
    ran_on = False
    for steps, read, have in zip(result["logged_steps"], result["frames_consumed"], result["frames_total"]):
        (s0, s1), (read0, read1), (have0, have1) = steps, read, have
        # the first rank out: fewer steps, or as many and all of its files read
        first, other = sorted([(s0, read0 != have0, read0, have0), (s1, read1 != have1, read1, have1)])
        first, other = first[:1] + first[2:], other[:1] + other[2:]
        assert first[1] == first[2], result  # the first rank out read all of its files
        stop = int(sync_stop(np.array([first[0]]), sync_every=sync_every)[0])
        # the other one ran on to the next control sync, or read all of its own before
        assert other[0] == stop or (other[0] < stop and other[1] == other[2]), (stop, result)
        ran_on |= other[0] > first[0]
        if sync_every == 1:
            assert s0 == s1
        if sync_every == 1000:
            assert (read0, read1) == (have0, have1)  # nothing dropped
    if sync_every > 1:  # not vacuous: in some sub-epoch a rank ran on past the first one out
        assert ran_on, result


@pytest.mark.slow
def test_equalized_bins_drop_nothing_in_a_real_training(tmp_path):
    """A flexible_auto plan by steps, its bins equalized by the simulated engine (every sub-epoch's ranks make the
    same number of batches), written as a plan file and read by the RETURNN-side dataset (``plan=``): in the real
    training every rank trains exactly its planned batches and nothing is dropped, where the plan as cut did drop."""
    needs_torch("the training needs torch")
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn dm-tree")
    pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")
    from i6_shard import core
    from i6_shard.core.io.file_costs import collect_file_costs
    from i6_shard.core.io.npz import save_npz
    from i6_shard.core.planning import plan_arrays
    from i6_shard.core.io.returnn_log import read_training_logs
    from i6_shard.core.pure.batching import Batching
    from i6_shard.core.pure.engine_sim import EngineSettings
    from i6_shard.core.pure.equal_steps import equalize_plan_layouts
    from i6_shard.core.pure.plan_sim import simulate_plan
    from .harness import hdf_files_dataset, hdf_seq_lengths, run_training, write_skewed_hdf_files

    num_files = 24
    work = str(tmp_path / "run")
    paths = write_skewed_hdf_files(os.path.join(work, "data"), num_files=num_files, seed=11)
    keys = [f"data/part{i:03d}.hdf" for i in range(num_files)]
    costs = collect_file_costs(paths, unit="steps", num_procs=1, batching=Batching(BATCH_SIZE, MAX_SEQS))
    settings = core.PlanSettings(
        num_shards=NUM_RANKS,
        partition_epoch=PARTITION_EPOCH,
        num_epochs=NUM_EPOCHS + 1,  # and the one RETURNN preloads
        distribution="flexible_auto",
        unit="steps",
    )
    plan = core.ShardPlan(keys, costs.costs, settings)
    lengths = [hdf_seq_lengths(p) for p in paths]
    engine = EngineSettings(batch_size=BATCH_SIZE, max_seqs=MAX_SEQS, torch_distributed={})
    cut_sims, _ = simulate_plan(plan, num_epochs=NUM_EPOCHS, file_lengths=lengths, engine=engine)
    assert sum(s.dropped_fraction for s in cut_sims) > 0  # not vacuous: the plan as cut drops data
    arrays = plan_arrays(plan)
    arrays["orders"], arrays["bounds"], info = equalize_plan_layouts(
        arrays["orders"], arrays["bounds"], file_lengths=lengths, settings=settings, engine=engine
    )
    plan_path = str(tmp_path / "plan.npz")
    save_npz(plan_path, arrays, kind="plan file", uncompressed=("orders", "bounds"))
    layouts = {k: (arrays["orders"][k, 0].astype(np.int64), arrays["bounds"][k, 0]) for k in range(2)}
    sims, _ = simulate_plan(
        plan, num_epochs=NUM_EPOCHS, file_lengths=lengths, engine=engine, layout=lambda k, r: layouts[k]
    )
    assert all(s.dropped_fraction == 0 for s in sims), info
    train = hdf_files_dataset(keys, num_shards=NUM_RANKS, partition_epoch=PARTITION_EPOCH, plan=plan_path)
    training = run_training(
        work,
        train=train,
        num_ranks=NUM_RANKS,
        num_epochs=NUM_EPOCHS,
        batch_size=BATCH_SIZE,
        max_seqs=MAX_SEQS,
        behavior_version=31,
        extra_config=IN_PROCESS,
    )
    logs = read_training_logs(training.log_files)
    for epoch in range(1, NUM_EPOCHS + 1):
        sim = sims[epoch - 1]
        for r in range(NUM_RANKS):
            rec = logs.ranks[r].sub_epochs[epoch]
            k, s = divmod(epoch - 1, PARTITION_EPOCH)
            order, bounds = layouts[k]
            b = r * PARTITION_EPOCH + s
            assert rec.file_keys == [keys[i] for i in order[bounds[b] : bounds[b + 1]]]
            assert rec.trained_steps == sim.steps_exact[r] == sim.steps_taken[r]
            assert int(np.sum(rec.step_frames)) == sim.frames_total[r]  # every frame of its files: nothing dropped
