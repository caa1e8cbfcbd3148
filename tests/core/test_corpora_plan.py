"""A plan of corpora mixed by weight through the command line, its plan file and summary: the issue's "Done when"
example (A weight 1, B weight 2.5; equal_steps predicts nothing dropped), and single-corpus plans unchanged."""

import json
import os

import numpy as np
import pytest

from i6_shard import cli
from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs
from i6_shard.core.io.plan_file import read_plan_file, read_plan_layout
from i6_shard.core.planning import read_plan_file as verify_plan_file
from i6_shard.core.pure.stats import check_no_repeat_in_sub_epochs

from tests.deps import H5PY_REASON

pytest.importorskip("h5py", reason=H5PY_REASON)

from tests.hdf_data import write_tiny_hdf_files  # noqa: E402

PLAN = ["--num-shards", "2", "--partition-epoch", "4", "--num-epochs", "24"]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """Costs archives of corpus A (16 files) and B (10 files), and their files."""
    d = tmp_path_factory.mktemp("corpora")
    files = write_tiny_hdf_files(str(d / "data"), num_files=26, seed=5, frames=(1, 50), max_seqs=12)
    paths = str(d / "A.npz"), str(d / "B.npz")
    save_file_costs(collect_file_costs(files[:16], unit="frames", num_procs=1), paths[0])
    save_file_costs(collect_file_costs(files[16:], unit="frames", num_procs=1), paths[1])
    return d, paths, files


def test_the_issues_done_when_example(corpora, capsys):
    d, (a, b), files = corpora
    out = str(d / "equal_steps")
    args = ["plan", "--sizes", a, "--sizes", b, "--weights", "1,2.5", *PLAN, "--distribution", "equal_steps"]
    assert cli.main(args + ["--batch-size", "200", "--max-seqs", "4", "--no-plot", "-o", out]) == 0
    plan_file = read_plan_file(os.path.join(out, "plan.npz"))
    plan = plan_file.plan
    assert plan.keys == files and plan.corpora.names == ("A", "B")
    reads = np.zeros(26, dtype=np.int64)
    for k in range(6):
        order, bounds = plan_file.layout(k)
        counts = np.bincount(order, minlength=26)
        assert counts[:16].tolist() == [1] * 16  # every A file once per full epoch
        assert int(counts[16:].sum()) == 25  # B's reads: 2.5 x its 10 files
        check_no_repeat_in_sub_epochs(order, bounds, partition_epoch=4)  # no file twice in a sub-epoch
        reads += counts
    assert reads[16:].tolist() == [15] * 10  # over 6 full epochs every B file exactly 15 times
    assert int(reads[16:].sum()) == 150  # = 6 x 2.5 x 10
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert summary["dropped_fraction_predicted"] == 0.0  # the exact simulation drops nothing
    assert all(len(set(row)) == 1 for row in summary["steps_exact"])  # equal steps on both ranks, every sub-epoch
    a_entry, b_entry = summary["corpora"]
    assert (a_entry["name"], a_entry["files"], a_entry["weight"]) == ("A", 16, "1")
    assert b_entry["weight"] == "2.5" and sum(b_entry["reads_per_full_epoch"]) == 150
    shares = np.array([a_entry["share_per_sub_epoch"], b_entry["share_per_sub_epoch"]])
    assert np.allclose(shares.sum(axis=0), 1.0, atol=1e-5)
    report = open(os.path.join(out, "report.txt")).read()
    assert "Corpora mixed by weight" in report and "\n  B " in report


def test_the_plan_file_serves_repeats_to_each_reader(corpora):
    d, (a, b), _ = corpora
    out = str(d / "balanced")
    args = ["plan", "--sizes", a, "--sizes", b, "--weights", "1,2.5", "--corpus-names", "in,web", *PLAN]
    assert cli.main(args + ["--distribution", "balanced", "--no-plot", "-o", out]) == 0
    path = os.path.join(out, "plan.npz")
    plan_file = read_plan_file(path)
    assert plan_file.plan.corpora.names == ("in", "web")
    for k in range(plan_file.orders.shape[0]):
        order, bounds = read_plan_layout(path, full_epoch_0idx=k, num_files=26)  # what the dataset class reads
        assert np.array_equal(order, plan_file.layout(k)[0]) and len(order) == bounds[-1] > 26
    verify_plan_file(path, verify=True)  # cut again: the same bins


def test_a_single_archive_without_weights_plans_as_before(corpora):
    d, (a, _), _ = corpora
    out = str(d / "one")
    assert cli.main(["plan", "--sizes", a, *PLAN, "--no-plot", "-o", out]) == 0
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert "corpora" not in summary and "corpora" not in np.load(os.path.join(out, "plan.npz")).files


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--weights", "1"], r"2 corpora, 2 corpus names and 1 weights: give one name and one weight per corpus"),
        (["--weights", "1,-2"], r"weights\[1\]='-2' is negative.*give a weight >= 0"),
        (
            ["--weights", "1,0.05"],
            r"corpus 'B' has 10 files at weight 0.05.*give it a weight >= 0.1 \(or 0 to leave it out\)",
        ),
    ],
)
def test_the_command_line_refuses_with_the_fix(corpora, capsys, extra, message):
    import re

    d, (a, b), _ = corpora
    assert cli.main(["plan", "--sizes", a, "--sizes", b, *extra, *PLAN, "--no-plot", "-o", str(d / "x")]) != 0
    assert re.search(message, capsys.readouterr().err)
