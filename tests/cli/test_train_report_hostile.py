"""`train-report` on damaged or crafted logs: numbers beyond any training, random bytes, sub-epochs the plan
cannot look up. Each is one error line (exit status 2) naming the log and its line, with nothing written."""

import json
import os

import numpy as np
import pytest

from i6_shard.cli import main

LOGS = os.path.join(os.path.dirname(__file__), "..", "data", "returnn_logs")
CASE = os.path.join(LOGS, "w4_bv24")


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """The plan of the 4-rank training, and one whose seeds end soon after it (random_seed_offset near 2**32)."""
    with open(os.path.join(CASE, "case.json")) as f:
        c = json.load(f)
    d = tmp_path_factory.mktemp("train_report_plans")
    out = {}
    for name, extra in (("plan", []), ("late_seeds", ["--random-seed-offset", str(2**32 - 100)])):
        assert (
            main(
                [
                    "plan",
                    "--sizes",
                    os.path.join(CASE, "file_sizes.npz"),
                    "--num-shards",
                    str(c["num_ranks"]),
                    "--partition-epoch",
                    str(c["partition_epoch"]),
                    "--num-epochs",
                    str(c["num_epochs"]),
                    "--distribution",
                    c["distribution"],
                    "--no-plot",
                    "-o",
                    str(d / name),
                    *extra,
                ]
            )
            == 0
        )
        out[name] = str(d / name / "plan.npz")
    return out


def _logs(tmp_path, *, tail2=b"", name2="returnn.torch-distrib-2-4.log"):
    """The 4 real logs in ``tmp_path/logs``, rank 2's with ``tail2`` appended (and named ``name2``)."""
    d = tmp_path / "logs"
    d.mkdir()
    paths = []
    for r in range(4):
        with open(os.path.join(CASE, f"returnn.torch-distrib-{r}-4.log"), "rb") as f:
            data = f.read()
        name = name2 if r == 2 else f"returnn.torch-distrib-{r}-4.log"
        (d / name).write_bytes(data + (tail2 if r == 2 else b""))
        paths.append(str(d / name))
    return paths, (data + tail2).count(b"\n") if tail2 else None


def _one_error_line(capsys, argv, tmp_path):
    capsys.readouterr()
    assert main(argv + ["--no-plot", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err and len(err) < 800, err
    assert not (tmp_path / "out").exists()
    return err


STEP = "ep {epoch} train, step {step}, mse 0.5, num_seqs {seqs}, complete 60.00%\n"


@pytest.mark.parametrize(
    "tail, message",
    [
        (STEP.format(epoch=1, step=3_000_000_000, seqs=3), "step 3000000000 is more than 1,000,000"),
        (STEP.format(epoch=1, step=0, seqs=10**30), f"num_seqs {10**30} is more than 4,294,967,295"),
        (STEP.format(epoch=99999999999999, step=0, seqs=3), "sub-epoch 99999999999999 is more than 2,147,483,647"),
    ],
    ids=["step", "num_seqs", "epoch"],
)
@pytest.mark.parametrize("with_plan", [False, True])
def test_numbers_beyond_any_training_name_the_log_line(tmp_path, capsys, plans, tail, message, with_plan):
    """A step of 3e9 took 14 GB and a minute; an epoch of 1e14 gave a shuffle-seed message naming no log."""
    paths, num_lines = _logs(tmp_path, tail2=tail.encode())
    err = _one_error_line(capsys, ["train-report", *paths] + (["--plan", plans["plan"]] if with_plan else []), tmp_path)
    assert err.startswith(f"error: returnn.torch-distrib-2-4.log:{num_lines}: {message}"), err
    assert "remove it, or give the log RETURNN wrote" in err


def test_a_sub_epoch_the_plan_cannot_seed_names_the_log_line(tmp_path, capsys, plans):
    """Within the bounds, but past the plan's last shuffle seed: the plan's message, with the log line first."""
    paths, num_lines = _logs(tmp_path, tail2=STEP.format(epoch=1000, step=0, seqs=3).encode())
    err = _one_error_line(capsys, ["train-report", *paths, "--plan", plans["late_seeds"]], tmp_path)
    assert err.startswith(
        f"error: returnn.torch-distrib-2-4.log:{num_lines}: sub-epoch 1000 cannot be looked up in "
        "the plan (full epoch 499 (epochs 999..1000) would shuffle with seed "
    ), err
    assert "give the plan of this training" in err


def test_a_huge_world_size_in_a_name(tmp_path, capsys):
    """Took 24 GB until killed: the world size came from the name unchecked."""
    paths, _ = _logs(tmp_path, name2="returnn.torch-distrib-2-999999999999.log")
    err = _one_error_line(capsys, ["train-report", *paths], tmp_path)
    assert err.startswith(
        "error: returnn.torch-distrib-2-999999999999.log: world size 999999999999 is more than "
        "65,536; the name is not one RETURNN gives"
    ), err


def test_a_huge_torchrun_rank(tmp_path, capsys):
    """Took 24 GB until killed: the rank of a [default<rank>]: prefix was trusted."""
    stdout = tmp_path / "log.run.1"
    with open(os.path.join(LOGS, "w2_bv24", "stdout.txt"), "rb") as f:
        stdout.write_bytes(f.read() + b"[default999999999999]:RETURNN starting up, x, cwd /x, Python y\n")
    num_lines = stdout.read_bytes().count(b"\n")
    err = _one_error_line(capsys, ["train-report", str(stdout)], tmp_path)
    assert err.startswith(f"error: log.run.1:{num_lines}: torchrun rank 999999999999 is more than 65,535"), err


def test_random_bytes_fail_even_with_a_plan_and_fail_on_alarm(tmp_path, capsys, plans):
    """Four logs of random bytes are not a training without alarms."""
    rng = np.random.RandomState(0)
    paths = []
    for r in range(4):
        p = tmp_path / f"returnn.torch-distrib-{r}-4.log"
        p.write_bytes(rng.bytes(64 * 1024))
        paths.append(str(p))
    err = _one_error_line(capsys, ["train-report", *paths, "--plan", plans["plan"], "--fail-on-alarm"], tmp_path)
    assert err.startswith("error: 4 of the logs hold no line of a RETURNN training"), err
    assert "returnn.torch-distrib-0-4.log" in err
