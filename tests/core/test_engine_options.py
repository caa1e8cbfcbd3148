"""The training's engine settings as plan options (``torch_distributed`` with its sync levels, ``max_seq_length``):
the simulation takes them, the plan file records them, contradictions and what the simulation cannot know exactly
are said; and distribution "equal_steps" on the planning floor (refusals, progress lines, the CLI)."""

import json
import os

import numpy as np
import pytest

from i6_shard import core
from i6_shard.core.io.plan_file import read_plan_head
from i6_shard.cli import main
from i6_shard.core.io import progress as progress_module
from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs
from i6_shard.core.pure.engine_sim import steps_taken
from tests.deps import H5PY_REASON

pytest.importorskip("h5py", reason=H5PY_REASON)

from ..hdf_data import write_tiny_hdf_files  # noqa: E402

LEVELS = {"sync": [{"group": 1, "type": "param", "every": 1}, {"group": "world", "type": "param", "every": 4}]}


@pytest.fixture(scope="module")
def costs_path(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("corpus"))
    rng = np.random.RandomState(7)
    files = write_tiny_hdf_files(
        directory,
        num_files=24,
        seed=7,
        frames=(1, 60),
        seqs_per_file=[int(min(25, max(1, rng.lognormal(np.log(5), 1.0)))) for _ in range(24)],
    )
    path = os.path.join(directory, "costs.npz")
    save_file_costs(collect_file_costs(files, unit="frames", num_procs=1), path)
    return path


def _plan(costs_path, **options):
    opts = dict(num_shards=3, partition_epoch=2, num_epochs=4, batch_size=120, max_seqs=4)
    request = core.PlanRequest.from_options(**{**opts, **options})
    return core.plan_archive(costs_path, request, compare=False)


def test_sync_levels_given_as_torch_distributed_are_what_the_simulation_takes(costs_path):
    plain = _plan(costs_path).ranks.simulation
    levels = _plan(costs_path, torch_distributed=LEVELS).ranks.simulation
    assert levels["exact"] and levels["engine"].torch_distributed == LEVELS
    for exact, taken in zip(levels["steps_exact"], levels["steps_taken"]):
        assert taken == steps_taken(exact, torch_distributed=LEVELS)
    assert levels["steps_exact"] == plain["steps_exact"]  # the same batches, other syncs
    assert levels["steps_taken"] != plain["steps_taken"]  # not vacuous: grad sync stops every rank with the first


def test_max_seq_length_filters_in_the_simulation(costs_path):
    plain = _plan(costs_path).ranks.simulation
    filtered = _plan(costs_path, max_seq_length=20).ranks.simulation
    assert filtered["engine"].max_seq_length == 20
    assert sum(map(sum, filtered["steps_exact"])) < sum(map(sum, plain["steps_exact"]))
    one_key = _plan(costs_path, max_seq_length={"data": 20}).ranks.simulation
    assert one_key["exact"] and one_key["steps_exact"] == filtered["steps_exact"]


@pytest.mark.parametrize(
    "option, value",
    [("max_seq_length", {"data": 40, "classes": 9}), ("batch_size", {"data": 120, "classes": 30})],
)
def test_several_data_keys_are_not_reported_as_exact(costs_path, option, value):
    simulation = _plan(costs_path, **{option: value}).ranks.simulation
    assert not simulation["exact"]
    assert f"{option} names the data keys 'data', 'classes'" in simulation["reason"]
    assert simulation["steps_exact"] == [None] * 4


def test_a_sync_that_contradicts_torch_distributed_is_refused():
    with pytest.raises(ValueError, match=r"reduce_type='param' contradicts torch_distributed=\{\}"):
        core.PlanRequest.from_options(
            num_shards=2, partition_epoch=1, num_epochs=1, reduce_type="param", param_sync_step=5, torch_distributed={}
        )
    with pytest.raises(ValueError, match="param_sync_step=5 contradicts"):
        core.PlanRequest.from_options(
            num_shards=2,
            partition_epoch=1,
            num_epochs=1,
            param_sync_step=5,
            torch_distributed={"reduce_type": "param", "param_sync_step": 4},
        )
    cli_default = core.PlanRequest.from_options(  # the command line and the job pass reduce_type at its default
        num_shards=2,
        partition_epoch=1,
        num_epochs=1,
        reduce_type="grad",
        torch_distributed={"reduce_type": "param", "param_sync_step": 4},
    )
    assert cli_default.sync.reduce_type == "param"
    same = core.PlanRequest.from_options(
        num_shards=2, partition_epoch=1, num_epochs=1, torch_distributed={"reduce_type": "param", "param_sync_step": 4}
    )
    assert (same.sync.reduce_type, same.sync.param_sync_step) == ("param", 4)


@pytest.mark.parametrize(
    "value, error, message",
    [
        ({"reduce_type": "params"}, ValueError, "reduce_type='params': RETURNN refuses it"),
        ([1], TypeError, "RETURNN needs a dict"),
        ({"sync": [{"group": 3, "type": "grad"}]}, ValueError, "divide 2"),
    ],
)
def test_torch_distributed_is_checked_as_returnn_checks_it(value, error, message):
    with pytest.raises(error, match=message):
        core.PlanRequest.from_options(num_shards=2, partition_epoch=1, num_epochs=1, torch_distributed=value)


def test_the_plan_file_records_the_engine_settings_it_was_simulated_with(costs_path, tmp_path):
    out = tmp_path / "plan"
    assert (
        main(
            [
                "plan",
                "--sizes",
                costs_path,
                "--num-shards",
                "3",
                "--partition-epoch",
                "2",
                "--num-epochs",
                "4",
                "--batch-size",
                "120",
                "--max-seq-length",
                "{'data': 50}",
                "--accum-grad-multiple-step",
                "2",
                "--torch-distributed",
                json.dumps(LEVELS),
                "--no-plot",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert "sync levels [{'group': 1" in (out / "report.txt").read_text()  # not the statistical model's "grad sync"
    head = read_plan_head(str(out / "plan.npz"))
    assert head.engine_settings == {
        "batch_size": 120,
        "max_seqs": None,
        "max_seq_length": {"data": 50},
        "accum_grad_multiple_step": 2,
        "torch_distributed": LEVELS,
    }
    unbatched = tmp_path / "plain"
    assert main(["plan", "--sizes", costs_path, "--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "4",
                 "--no-plot", "-o", str(unbatched)]) == 0  # fmt: skip
    assert read_plan_head(str(unbatched / "plan.npz")).engine_settings is None
    with np.load(unbatched / "plan.npz") as arrays:
        assert "engine_settings" not in arrays.files


def test_equal_steps_on_the_command_line_prints_progress_and_stores_its_bins(costs_path, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress_module, "DEFAULT_INTERVAL", 0.0)
    out = tmp_path / "plan"
    args = ["plan", "--sizes", costs_path, "--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "4"]
    assert main(args + ["--distribution", "equal_steps", "--batch-size", "120", "--no-plot", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "plan (equal steps): 4/6 sub-epochs" in err, err  # 2 full epochs + the preloaded sub-epoch's
    stored = core.read_plan_file(str(out / "plan.npz"))
    request = core.PlanRequest.from_options(
        num_shards=3, partition_epoch=2, num_epochs=4, batch_size=120, distribution="equal_steps"
    )
    plan = core.make_plan(
        core.load_file_sizes(costs_path), request, lengths=core.io.file_costs.load_file_costs(costs_path)
    )
    for k in range(stored.orders.shape[0]):
        order, bounds = plan.layout(full_epoch_0idx=k)
        assert stored.orders[k, 0].tolist() == order.tolist() and stored.bounds[k, 0].tolist() == bounds.tolist()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--unsharded", "--batch-size", "120"], "the plan is 'unsharded'"),
        ([], "no batching was given"),
        (["--batch-size", "120", "--max-seq-length", "{'data': 5, 'classes': 1}"], "not simulated exactly"),
    ],
)
def test_equal_steps_refuses_what_it_cannot_cut(costs_path, tmp_path, capsys, extra, message):
    args = ["plan", "--sizes", costs_path, "--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "4"]
    assert main(args + ["--distribution", "equal_steps", "--no-plot", "-o", str(tmp_path / "p")] + extra) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "p" / "plan.npz").exists()


def test_equal_steps_from_a_sizes_archive_in_bytes_asks_for_the_lengths(tmp_path, capsys):
    keys = [f"/nonexistent/f{i}" for i in range(12)]
    path = str(tmp_path / "sizes.npz")
    core.save_file_sizes(core.FileSizes(keys, np.arange(1, 13, dtype=np.int64)), path)
    args = ["plan", "--sizes", path, "--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "2"]
    assert main(args + ["--distribution", "equal_steps", "--batch-size", "9", "--no-plot", "-o", str(tmp_path / "p")])
    assert "needs every file's sequence lengths" in capsys.readouterr().err
