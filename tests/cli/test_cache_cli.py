"""Command line `plan --ranks-per-node` (the per-node cache footprint) and `compare-plans` (a change of
GPU count on resume): what they write, that a plan without the option is written as before, clear errors."""

import json
import os

import numpy as np
import pytest

from i6_shard import core
from i6_shard.core.io.demo import lognormal_sizes
from i6_shard.core.reporting.plan_change import compare_plan_files
from i6_shard.cli import main

from ..core.pure.test_cache import brute_force


PLAN = ["--num-shards", "6", "--partition-epoch", "3", "--num-epochs", "7", "--no-plot"]


def test_plan_without_ranks_per_node_writes_the_same_bytes_as_before(tmp_path, sizes_file):
    path, keys, sizes = sizes_file
    assert main(["plan", "--sizes", path, *PLAN, "-o", str(tmp_path / "cli")]) == 0
    ref = tmp_path / "ref"
    ref.mkdir()
    # The training's 7 sub-epochs and the one RETURNN preloads after them.
    plan = core.ShardPlan(
        keys, sizes, core.PlanSettings(num_shards=6, partition_epoch=3, num_epochs=8, preloaded_sub_epochs=1)
    )
    core.write_plan_outputs(
        plan,
        plan_path=str(ref / "plan.npz"),
        summary_path=str(ref / "summary.json"),
        report_path=str(ref / "report.txt"),
    )
    for name in ("plan.npz", "summary.json", "report.txt"):
        assert (tmp_path / "cli" / name).read_bytes() == (ref / name).read_bytes(), name
    assert "cache" not in json.loads((ref / "summary.json").read_text())


@pytest.mark.parametrize(
    "options, node_cache",
    [
        (["--ranks-per-node", "4"], dict(ranks_per_node=4)),
        (
            ["--ranks-per-node", "2", "--preload-next-n-sub-epochs", "0"],
            dict(ranks_per_node=2, preload_next_n_sub_epochs=0),
        ),
        (["--ranks-per-node", "8", "--no-cached-file"], dict(ranks_per_node=8, cached_file=False)),
    ],
)
def test_plan_with_ranks_per_node_adds_the_footprint(tmp_path, sizes_file, capsys, options, node_cache):
    from i6_shard.core.pure.cache import NodeCache

    path, keys, sizes = sizes_file
    assert main(["plan", "--sizes", path, *PLAN, *options, "--cache-size", "3M", "-o", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    planned = 7 + node_cache.get("preload_next_n_sub_epochs", 1)  # the plan holds the preloaded sub-epochs too
    plan = core.ShardPlan(
        keys,
        sizes,
        core.PlanSettings(num_shards=6, partition_epoch=3, num_epochs=planned, preloaded_sub_epochs=planned - 7),
    )
    held, _, shared = brute_force(plan, NodeCache(**node_cache), 7)  # the training's sub-epochs
    assert summary["cache_peak_bytes_per_node"] == max(map(max, held))
    assert summary["cache"]["per_sub_epoch"]["shared_fs_bytes"] == shared
    assert summary["cache"]["cache_size"] == 3 * 2**20
    assert "Per-node file cache" in printed and "Per-node file cache" in (tmp_path / "out" / "report.txt").read_text()


@pytest.mark.parametrize(
    "options, message",
    [
        # One rule for the command line and ShardPlanJob (core.PlanRequest), naming the options by their Python names.
        (["--cache-size", "1G"], "cache_size describes the per-node cache: give ranks_per_node too"),
        (["--no-cached-file", "--preload-next-n-sub-epochs", "0"], "cached_file describes the per-node cache"),
        (["--ranks-per-node", "4", "--cache-size", "lots"], "cache size 'lots' is not a byte count"),
        (["--ranks-per-node", "0"], "ranks_per_node=0 must be a positive int"),
        (
            ["--ranks-per-node", "2", "--preload-next-n-sub-epochs", "-1"],
            "preload_next_n_sub_epochs=-1 must be a non-negative int",
        ),
    ],
)
def test_plan_cache_option_errors_write_nothing(tmp_path, sizes_file, capsys, options, message):
    path, _, _ = sizes_file
    assert main(["plan", "--sizes", path, *PLAN, *options, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def plan_dir(tmp_path, sizes_path, name, *options):
    out = str(tmp_path / name)
    assert (
        main(
            [
                "plan",
                "--sizes",
                sizes_path,
                "--partition-epoch",
                "3",
                "--num-epochs",
                "9",
                "--no-plot",
                *options,
                "-o",
                out,
            ]
        )
        == 0
    )
    return out


@pytest.mark.slow
def test_compare_plans_8_to_6_ranks(tmp_path, sizes_file, capsys):
    path, keys, _ = sizes_file
    old_dir = plan_dir(tmp_path, path, "p8", "--num-shards", "8")
    new_dir = plan_dir(tmp_path, path, "p6", "--num-shards", "6")
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert (
        main(["compare-plans", old_dir, os.path.join(new_dir, "plan.npz"), "--resume-epoch", "5", "-o", str(out)]) == 0
    )
    printed = capsys.readouterr().out
    plot = ["plot.png"] if core.reporting.matplotlib_available() else []  # without matplotlib: a note, no plot
    assert sorted(os.listdir(out)) == [".i6_shard-set", "files.json", *plot, "report.txt", "summary.json"]
    assert printed.startswith((out / "report.txt").read_text())
    summary = json.loads((out / "summary.json").read_text())
    old, new = core.load_plan(os.path.join(old_dir, "plan.npz")), core.load_plan(os.path.join(new_dir, "plan.npz"))
    before = {k for r in range(8) for k in old.files_for(epoch=4, shard_index=r)}
    after = {k for e in (5, 6) for r in range(6) for k in new.files_for(epoch=e, shard_index=r)}
    (full,) = summary["full_epochs"]
    assert (full["full_epoch_0idx"], full["old_epochs"], full["new_epochs"]) == (1, [4, 4], [5, 6])
    assert full["read_twice"] == len(before & after) > 0
    assert full["never_read"] == len(set(keys) - before - after) > 0
    per_rank_twice = [
        sum(1 for e in (5, 6) for k in new.files_for(epoch=e, shard_index=r) if k in before) if r < 6 else 0
        for r in range(8)
    ]
    assert [row["read_twice"] for row in full["per_rank"]] == per_rank_twice
    files = json.loads((out / "files.json").read_text())
    assert sorted(x["key"] for x in files["full_epochs"][0]["never_read"]) == sorted(set(keys) - before - after)
    assert f"read twice   {full['read_twice']} of 60 files" in printed
    # The same as a function: the summary it returns is the one written, and it writes the same files.
    fn_out = tmp_path / "fn"
    assert compare_plan_files(old_dir, new_dir, resume_epoch=5, out_dir=fn_out, plot=bool(plot)) == summary
    assert all((fn_out / n).read_bytes() == (out / n).read_bytes() for n in os.listdir(out))
    assert compare_plan_files(os.path.join(old_dir, "plan.npz"), new_dir, resume_epoch=5) == summary

    # Without -o it prints the same report and writes nothing; at a boundary nothing is read twice or never.
    assert main(["compare-plans", old_dir, new_dir, "--resume-epoch", "7"]) == 0
    printed = capsys.readouterr().out
    assert "Epoch 7 starts full epoch 2" in printed and "nothing is read twice or never" in printed
    assert sorted(os.listdir(tmp_path)) == ["cmp", "file_sizes.npz", "fn", "p6", "p8"]


def test_compare_plans_errors(tmp_path, sizes_file, capsys):
    path, _, _ = sizes_file
    old_dir = plan_dir(tmp_path, path, "p8", "--num-shards", "8")
    unsharded = plan_dir(tmp_path, path, "u6", "--num-shards", "6", "--unsharded")
    other_p = str(tmp_path / "p2")
    assert (
        main(
            [
                "plan",
                "--sizes",
                path,
                "--num-shards",
                "6",
                "--partition-epoch",
                "2",
                "--num-epochs",
                "4",
                "--no-plot",
                "-o",
                other_p,
            ]
        )
        == 0
    )
    capsys.readouterr()
    for new, message in (
        (unsharded, "the new plan is unsharded"),
        (other_p, "partition_epoch=3 and 2"),
        (str(tmp_path / "missing"), "does not exist"),
    ):
        assert main(["compare-plans", old_dir, new, "--resume-epoch", "5", "-o", str(tmp_path / "cmp")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err, err
        assert not (tmp_path / "cmp").exists()
    assert main(["compare-plans", old_dir, old_dir, "--resume-epoch", "0"]) == 2
    assert "resume_epoch=0 must be a positive int" in capsys.readouterr().err
    # Past the plans' sub-epochs (9 and the preloaded 10th): nothing to resume there.
    assert main(["compare-plans", old_dir, old_dir, "--resume-epoch", "99"]) == 2
    assert "resume_epoch=99, but the old plan holds sub-epochs 1..10" in capsys.readouterr().err


def test_compare_plans_counts_in_the_plans_unit(tmp_path, capsys):
    """Plans balanced by frames report what is read twice or never in frames, not as bytes."""
    keys = [f"/c/part-{i:02d}.hdf" for i in range(40)]
    frames = lognormal_sizes(40, seed=2, median_bytes=5000)
    dirs = []
    for num_shards in (4, 3):
        plan = core.ShardPlan(
            keys, frames, core.PlanSettings(num_shards=num_shards, partition_epoch=2, num_epochs=4, unit="frames")
        )
        out = tmp_path / f"p{num_shards}"
        out.mkdir()
        core.write_plan_outputs(
            plan,
            plan_path=str(out / "plan.npz"),
            summary_path=str(out / "summary.json"),
            report_path=str(out / "report.txt"),
        )
        dirs.append(str(out))
    assert main(["compare-plans", *dirs, "--resume-epoch", "2"]) == 0
    printed = capsys.readouterr().out
    twice = next(line for line in printed.splitlines() if line.strip().startswith("read twice"))
    assert " frames)" in twice and "iB" not in twice, twice


def _rewrite_bins(path, change):
    """Rewrite a plan file's stored bins with ``change(orders, bounds)`` (a valid zip, indices in range)."""
    from i6_shard.core.io.npz import save_npz
    from i6_shard.core.planning import plan_arrays

    arrays = plan_arrays(core.load_plan(path))
    change(arrays["orders"], arrays["bounds"])
    save_npz(path, arrays, kind="plan file", uncompressed=("orders", "bounds"))


def test_compare_plans_reads_the_stored_bins_not_a_recomputation(tmp_path, sizes_file, capsys):
    """The old plan's stored bins are what the training read: compare-plans counts them. Here its stored
    full epoch 1 puts the files in reverse order, which no recomputation gives; a plan whose stored bins
    repeat a file is refused, naming the file and the full epoch."""
    path, keys, _ = sizes_file
    old_dir = plan_dir(tmp_path, path, "p8", "--num-shards", "8")
    new_dir = plan_dir(tmp_path, path, "p6", "--num-shards", "6")
    old_path = os.path.join(old_dir, "plan.npz")
    _rewrite_bins(old_path, lambda orders, bounds: orders.__setitem__((1, 0), orders[1, 0][::-1].copy()))
    stored = core.read_plan_file(old_path)
    order, bounds = stored.layout(1)
    new = core.load_plan(os.path.join(new_dir, "plan.npz"))
    # Epoch 4 is sub-epoch 1 of full epoch 1 (P=3): its bins are r*3 + 0 of the stored layout.
    before = {keys[i] for r in range(8) for i in order[bounds[r * 3] : bounds[r * 3 + 1]].tolist()}
    after = {k for e in (5, 6) for r in range(6) for k in new.files_for(epoch=e, shard_index=r)}
    recomputed = {k for r in range(8) for k in stored.plan.files_for(epoch=4, shard_index=r)}
    assert before != recomputed  # the rewrite changed what the old training read
    summary = compare_plan_files(old_dir, new_dir, resume_epoch=5)
    (full,) = summary["full_epochs"]
    assert full["read_twice"] == len(before & after)
    assert full["never_read"] == len(set(keys) - before - after)

    _rewrite_bins(old_path, lambda orders, bounds: orders.__setitem__((1, 0), 3))
    capsys.readouterr()
    assert main(["compare-plans", old_dir, new_dir, "--resume-epoch", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "is corrupt: full epoch 1 (layout 0)" in err and "exactly once" in err, err


def test_plan_counts_the_files_the_sub_epoch_dataset_adds_to_every_sub_epoch(tmp_path, sizes_file, capsys):
    path, _, _ = sizes_file
    assert main(["plan", "--sizes", path, *PLAN, "--ranks-per-node", "4", "-o", str(tmp_path / "plain")]) == 0
    assert (
        main(
            [
                "plan",
                "--sizes",
                path,
                *PLAN,
                "--ranks-per-node",
                "4",
                "--sub-epoch-constant-bytes",
                "2K",
                "-o",
                str(tmp_path / "const"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    plain = json.loads((tmp_path / "plain" / "summary.json").read_text())["cache"]
    const = json.loads((tmp_path / "const" / "summary.json").read_text())["cache"]
    assert const["constant_bytes"] == 2048 and "constant_bytes" not in plain
    held, held_plain = np.array(const["per_sub_epoch"]["held_bytes"]), np.array(plain["per_sub_epoch"]["held_bytes"])
    assert (held == held_plain + 2048).all()  # every node, every sub-epoch
    shared = np.array(const["per_sub_epoch"]["shared_fs_bytes"])
    shared_plain = np.array(plain["per_sub_epoch"]["shared_fs_bytes"])
    assert (shared[0] == shared_plain[0] + 2048).all() and (shared[1:] == shared_plain[1:]).all()  # read once
    assert const["peak_bytes"] == plain["peak_bytes"] + 2048
    assert "every sub-epoch      2.00 KiB of files the sub-epoch dataset reads besides its bin's" in printed


def test_constant_bytes_need_ranks_per_node(tmp_path, sizes_file, capsys):
    path, _, _ = sizes_file
    assert main(["plan", "--sizes", path, *PLAN, "--sub-epoch-constant-bytes", "2K", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sub_epoch_constant_bytes" in err and "give ranks_per_node too" in err
    assert not os.path.exists(tmp_path / "o")
