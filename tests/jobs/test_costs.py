"""ComputeFileCostsJob with the real Sisyphus: the same bytes as `python -m i6_shard costs`, and
ShardPlanJob balancing by the archive's unit with the predicted loss under RETURNN's batching."""

import json
import subprocess
import sys

import pytest

from tests.deps import H5PY_REASON, RETURNN_REASON
from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip("h5py", reason=H5PY_REASON)
pytest.importorskip("returnn", reason=RETURNN_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.core.io.file_costs import load_file_costs  # noqa: E402
from i6_shard.jobs import ComputeFileCostsJob, ShardPlanJob  # noqa: E402
from tests.hdf_data import write_tiny_hdf_files  # noqa: E402


def _read(path):
    with open(path, "rb") as f:
        return f.read()


_STEPS = {"batch_size": 600, "max_seqs": 8}


@pytest.mark.parametrize("unit", ["frames", "seqs", "steps"])
def test_job_equals_cli_and_plans_by_its_unit(work_dir, unit):
    paths = write_tiny_hdf_files(str(work_dir / "data"), num_files=12, seed=5, max_seqs=30, frames=(5, 60))
    list_path = str(work_dir / "list.txt")
    core.write_file_list(paths, list_path)
    extra = _STEPS if unit == "steps" else {}
    job = ComputeFileCostsJob(tk.Path(list_path), unit=unit, **extra)
    assert ComputeFileCostsJob(tk.Path(list_path), unit=unit, num_procs=3, **extra)._sis_id() == job._sis_id()
    assert (
        ComputeFileCostsJob(tk.Path(list_path), unit="seqs" if unit == "frames" else "frames")._sis_id()
        != job._sis_id()
    )
    if unit == "steps":
        assert ComputeFileCostsJob(tk.Path(list_path), unit=unit, batch_size=600, max_seqs=9)._sis_id() != job._sis_id()
    else:
        explicit = ComputeFileCostsJob(
            tk.Path(list_path), unit=unit, batch_size=None, max_seqs=None, length_column=None
        )
        assert explicit._sis_id() == job._sis_id()  # the steps and arrow options leave the other units' job ids
        assert ComputeFileCostsJob(tk.Path(list_path), unit=unit, length_column="n")._sis_id() != job._sis_id()
    run_job(job)
    cli_out = str(work_dir / "cli.npz")
    cli_extra = ["--batch-size", "600", "--max-seqs", "8"] if unit == "steps" else []
    subprocess.run(
        [sys.executable, "-m", "i6_shard", "costs", list_path, "--unit", unit, "-o", cli_out, *cli_extra],
        check=True,
        capture_output=True,
    )
    assert _read(job.out_file_costs.get_path()) == _read(cli_out)
    costs = load_file_costs(job.out_file_costs.get_path())
    assert costs.unit == unit and costs.keys == paths

    plan_job = ShardPlanJob(
        job.out_file_costs,
        num_shards=2,
        partition_epoch=2,
        num_epochs=4,
        distribution="balanced",
        plot=False,
        batch_size=600,
        max_seqs=8,
    )
    run_job(plan_job)
    with open(plan_job.out_summary.get_path()) as f:
        summary = json.load(f)
    assert summary["unit"] == unit and summary["settings"]["unit"] == unit
    assert 0 <= summary["dropped_fraction_predicted"] <= 1
    assert summary["batching"]["batch_size"] == 600 and summary["batching"]["max_seqs"] == 8
    plan = core.load_plan(plan_job.out_plan.get_path())
    assert plan.settings.unit == unit and plan.costs.tolist() == costs.costs.tolist()
    assert "dropped when the first rank runs out" in _read(plan_job.out_report.get_path()).decode()


def test_new_options_leave_the_plan_job_id(work_dir):
    sizes = str(work_dir / "sizes.npz")
    plain = ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=4)
    explicit = ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=4, batch_size=None, max_seqs=None)
    assert plain._sis_id() == explicit._sis_id()
    assert (
        ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=4, batch_size=100)._sis_id() != plain._sis_id()
    )
    with pytest.raises(ValueError, match="batch_size"):
        ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=4, batch_size=0)


def test_steps_plan_records_its_batching_without_batch_options(work_dir):
    paths = write_tiny_hdf_files(str(work_dir / "data"), num_files=8, seed=6, max_seqs=20, frames=(5, 60))
    job = ComputeFileCostsJob(paths, unit="steps", batch_size=300)
    run_job(job)
    plan_job = ShardPlanJob(
        job.out_file_costs, num_shards=2, partition_epoch=2, num_epochs=4, distribution="balanced", plot=False
    )
    run_job(plan_job)
    with open(plan_job.out_summary.get_path()) as f:
        summary = json.load(f)
    assert summary["unit"] == "steps" and summary["batching"]["batch_size"] == 300
    assert summary["batching"]["max_seqs"] is None and 0 <= summary["dropped_fraction_predicted"] <= 1
    assert "milli-steps" in _read(plan_job.out_report.get_path()).decode()


def test_bad_options(work_dir):
    with pytest.raises(ValueError, match="unit='steps' needs batch_size"):
        ComputeFileCostsJob(["/abs/a.hdf"], unit="steps")
    with pytest.raises(ValueError, match="other units take neither"):
        ComputeFileCostsJob(["/abs/a.hdf"], unit="frames", max_seqs=3)
    with pytest.raises(ValueError, match="max_seqs"):
        ComputeFileCostsJob(["/abs/a.hdf"], unit="steps", max_seqs=0)
    with pytest.raises(ValueError, match="length_column=''"):
        ComputeFileCostsJob(["/abs/a.arrow"], unit="seqs", length_column="")


def test_job_reads_arrow_shards(work_dir):
    pa = pytest.importorskip("pyarrow", reason="arrow shards need pyarrow: pip install pyarrow")

    paths = []
    for i, lengths in enumerate([[3, 5], [7], [1, 1, 1]]):
        paths.append(str(work_dir / f"s{i}.arrow"))
        with pa.OSFile(paths[-1], "wb") as sink, pa.ipc.new_stream(sink, pa.schema([("n", pa.int64())])) as w:
            w.write_batch(pa.record_batch([pa.array(lengths)], names=["n"]))
    job = ComputeFileCostsJob(paths, unit="frames", length_column="n")
    run_job(job)
    costs = load_file_costs(job.out_file_costs.get_path())
    assert costs.costs.tolist() == [8, 7, 3] and costs.num_seqs.tolist() == [2, 1, 3]
    with pytest.raises(ValueError, match="unit='bytes' cannot be read"):
        ComputeFileCostsJob(["/abs/a.hdf"], unit="bytes")
    with pytest.raises(ValueError, match="no leaf at 'video'"):
        ComputeFileCostsJob([{"audio": "/abs/a.hdf", "text": "/abs/t.hdf"}], leaf="video")
