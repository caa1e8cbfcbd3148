"""recipe_examples/config/planned_training.py with the real Sisyphus manager, i6_core and RETURNN: a 2-rank
torchrun training on the CPU (gloo) with ``plan=``. RETURNN's own per-rank logs show that every rank read
exactly the planned files in every sub-epoch, the one it preloads after the last included."""

import ast
import glob
import os
import shutil
import subprocess

import pytest

from tests.deps import needs_torch

from tests.blocking import wait_for_process
from tests.jobs.conftest import SISYPHUS_REASON, sis_command

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip("psutil", reason="Sisyphus' LocalEngine needs psutil: pip install psutil")
pytest.importorskip(
    "better_exchook", reason="the example's settings.py uses better_exchook: pip install better_exchook"
)
needs_torch("the training needs torch")
pytest.importorskip(
    "i6_core.returnn",
    reason="the training job is i6_core's ReturnnTrainingJob: clone "
    "github.com/rwth-i6/i6_core into recipe/ or put it on PYTHONPATH",
)
pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from i6_shard import core  # noqa: E402
from i6_shard.core.io.returnn_log import read_training_logs  # noqa: E402

from .harness import _training_lock  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _returnn_root():
    """A RETURNN root with rnn.py (i6_core runs it): $RETURNN_ROOT, or an unpacked sdist under /tmp."""
    candidates = [os.environ.get("RETURNN_ROOT", "")] + sorted(glob.glob("/tmp/returnn_sdist/returnn-*"))
    for root in candidates:
        if root and os.path.isfile(os.path.join(root, "rnn.py")):
            return root
    pytest.skip(
        "no RETURNN root with rnn.py: set RETURNN_ROOT to a RETURNN source checkout (or the PyPI sdist "
        "unpacked); the wheel has no rnn.py"
    )


def run_sis_manager(sis: str, config: str, *, setup, env, log_path) -> str:
    """``sis m -r CONFIG`` in ``setup`` until every output is there (a real training's lock held); its log. No time
    limit: a hang guard fails only when the manager's log and work dir stood still for a long time."""
    with _training_lock(), open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sis, "m", "-r", config],
            cwd=setup,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # until it exits by itself (done, or nothing runnable left), as long as its log or work dir changes
        wait_for_process(proc, what=f"`sis m -r` (log: {log_path})", watch=[log_path, os.path.join(setup, "work")])
    with open(log_path, encoding="utf-8", errors="replace") as f:
        sis_log = f.read()
    assert "All output calculated" in sis_log, sis_log[-5000:]
    return sis_log


def test_every_rank_reads_the_planned_files_in_a_real_training(tmp_path):
    root, sis = _returnn_root(), sis_command()[0]
    setup = str(tmp_path / "setup")
    shutil.copytree(
        os.path.join(REPO, "recipe_examples"),
        setup,
        ignore=shutil.ignore_patterns("__pycache__", "work", "output", "alias"),
    )
    os.mkdir(os.path.join(setup, "work"))
    env = dict(os.environ, RETURNN_ROOT=root, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    run_sis_manager(sis, "config/planned_training.py", setup=setup, env=env, log_path=str(tmp_path / "sis.log"))
    out = os.path.join(setup, "output", "planned_training")
    with open(os.path.join(out, "verify_ok")) as f:
        assert f.read().strip() == "True"

    plan = core.load_plan(os.path.join(out, "plan.npz"))
    assert (plan.settings.num_shards, plan.settings.partition_epoch, plan.settings.distribution) == (2, 3, "balanced")
    (train_dir,) = glob.glob(os.path.join(setup, "work", "i6_core", "returnn", "training", "ReturnnTrainingJob.*"))
    logs = sorted(glob.glob(os.path.join(train_dir, "work", "returnn.torch-distrib-*-2.log")))
    training = read_training_logs(logs)
    assert training.num_ranks == 2
    assert training.epochs == list(range(1, 7))
    for rank_log in training.ranks:
        for epoch in range(1, 7):
            got = rank_log.sub_epochs[epoch].file_keys
            assert got == plan.files_for(epoch=epoch, shard_index=rank_log.rank), (rank_log.rank, epoch)
            assert rank_log.sub_epochs[epoch].finished
        # The sub-epoch RETURNN loads ahead after the last one comes from the plan too (its 7th).
        with open(rank_log.path, encoding="utf-8") as f:
            (line,) = [ln for ln in f if ": using files for epoch 7: " in ln]
        assert ast.literal_eval(line.split(": using files for epoch 7: ", 1)[1].strip()) == plan.files_for(
            epoch=7, shard_index=rank_log.rank
        )
    # The training report and the two pictures are registered outputs of the example.
    with open(os.path.join(out, "train_report.txt"), encoding="utf-8") as f:
        text = f.read()
    assert text.count("files as planned") == 2 * 6
    # The plan takes the training's batching from its config (stated once): every rank's logged steps are the plan's.
    assert "planned steps      simulated exactly; 0 of 12 finished (sub-epoch, rank) differ" in text, text[:2000]
    for name in ("plan_plot.png", "train_plot.png"):
        with open(os.path.join(out, name), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
