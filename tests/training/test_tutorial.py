"""docs/tutorial.md as written: its step 3 (``scripts/setup_tutorial.py``) run verbatim in a venv over this Python
(which stands in for steps 1 and 2: a venv with Sisyphus, and a clone of i6_core), then its step 4, ``sis m -r``, in
a shell without ``RETURNN_ROOT``: the setup remembers the RETURNN root itself. It installs no torch but the pinned
CPU build, and leaves both reports and both plots among the registered outputs.

The setup it makes is the README's recipe as written (its settings.py and config/train.py, extracted from the README,
on data from ``python -m i6_shard make-data``), so the same run, by the real Sisyphus manager with i6_core and RETURNN
(a 2-rank torchrun training on the CPU), also shows the README's claims: the outputs the README names exist, the plan
is what the ranks read, and the training report finds every rank's files as planned. (That the README's recipe takes
``RETURNN_ROOT`` from the environment first is checked without a training, in tests/returnn_config/test_i6core.py.)"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.jobs.conftest import needs_recipe_training, sis_command

torch = needs_recipe_training("the tutorial trains with torch")
pytest.importorskip("matplotlib", reason="the recipe registers the plots: pip install matplotlib")

from .test_planned_training_example import run_sis_manager  # noqa: E402

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import setup_tutorial  # noqa: E402

sys.path.pop(0)


def _tutorial_steps():
    """{step number: its lines} of the tutorial's command block."""
    with open(os.path.join(REPO, "docs", "tutorial.md"), encoding="utf-8") as f:
        (block,) = re.findall(r"## The commands\n\n```bash\n(.*?)```", f.read(), re.DOTALL)
    steps, current = {}, None
    for line in block.splitlines():
        head = re.match(r"# (\d)\. ", line)
        if head:
            current = int(head.group(1))
        elif line.strip() and not line.startswith("#"):
            steps.setdefault(current, []).append(line)
    return steps


def test_the_tutorial_pins_the_cpu_build_of_torch():
    """The pin cannot be met by a CUDA build, and the check accepts exactly the CPU build the tests run with."""
    assert setup_tutorial.TORCH_PIN == "torch==2.13.0+cpu"
    assert torch.__version__ == setup_tutorial.TORCH_VERSION and torch.version.cuda is None
    assert setup_tutorial.check_torch(sys.executable) == "2.13.0+cpu"
    assert "torch" not in " ".join(setup_tutorial.PACKAGES)  # torch only through the pin


def test_the_torch_check_fails_loudly_for_another_build(tmp_path, capsys):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("__version__ = '2.14.1'\nclass version:\n    cuda = '12.8'\n")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    with pytest.raises(SystemExit, match=r"torch 2\.14\.1 \(CUDA 12\.8\), not the CPU build 2\.13\.0\+cpu"):
        setup_tutorial.check_torch(str(wrapper))


def test_the_tutorial_sets_up_trains_and_reports(tmp_path):
    import i6_core

    steps = _tutorial_steps()
    assert steps[3] == ["python /path/to/i6_shard/scripts/setup_tutorial.py setup --i6-core i6_core"]
    assert steps[4] == [
        "cd setup && sis m -r config/train.py",
        "cat output/sharding/report.txt output/train/sharding_report.txt",
    ]
    # Steps 1 and 2: a venv (over this Python, which has Sisyphus) and i6_core where the tutorial clones it.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(tmp_path / "venv")], check=True)
    os.symlink(os.path.dirname(os.path.abspath(i6_core.__file__)), tmp_path / "i6_core")
    venv_bin = str(tmp_path / "venv" / "bin")
    env = {k: v for k, v in os.environ.items() if k != "RETURNN_ROOT"}  # a new shell: no RETURNN_ROOT
    env.update(VIRTUAL_ENV=str(tmp_path / "venv"), PATH=os.pathsep.join([venv_bin, env.get("PATH", "")]))
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])  # the manager's i6_shard: this checkout
    (step3,) = steps[3]
    with open(tmp_path / "setup.log", "wb") as log:
        done = subprocess.run(
            ["bash", "-c", step3.replace("/path/to/i6_shard", REPO)], cwd=tmp_path, env=env, stdout=log, stderr=log
        )
    setup_log = (tmp_path / "setup.log").read_text(errors="replace")
    assert done.returncode == 0, setup_log[-5000:]
    assert not re.search(r"^(Collecting|Downloading) (torch|nvidia)", setup_log, re.M), "pip fetched a torch build"
    assert "torch 2.13.0+cpu: the CPU build" in setup_log
    setup = tmp_path / "setup"
    (root_line,) = [
        line for line in (setup / "settings.py").read_text().splitlines() if line.startswith("RETURNN_ROOT")
    ]
    assert os.path.isfile(os.path.join(eval(root_line.split("=", 1)[1]), "rnn.py"))

    run_sis_manager(sis_command()[0], "config/train.py", setup=setup, env=env, log_path=str(tmp_path / "sis.log"))
    cat = subprocess.run(["bash", "-c", steps[4][1]], cwd=setup, env=env, capture_output=True, text=True, check=True)
    assert "i6_shard plan report" in cat.stdout and cat.stdout.count("files as planned") == 2 * 4, cat.stdout
    for name in ("sharding/plot.png", "train/plot.png"):  # the pictures among the registered outputs
        assert (setup / "output" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    _assert_the_plan_has_the_trainings_steps(setup)
    _assert_the_readme_recipes_outputs(setup)
    shutil.rmtree(setup / "work", ignore_errors=True)  # the training's checkpoints


def _assert_the_readme_recipes_outputs(setup):
    """What the README says its recipe leaves: the plan of 2 ranks, 2 sub-epochs, equal_steps on frames, for 2 passes
    (4 sub-epochs) and the one RETURNN preloads; every rank read exactly its planned files in every sub-epoch; the
    training report finds them as planned and raises no alarm; the learning rates and both plots are outputs."""
    from i6_shard import core
    from i6_shard.core.io.returnn_log import read_training_logs

    config, settings = setup_tutorial.readme_blocks()
    assert (setup / "config" / "train.py").read_text() == config  # the README's recipe as written
    assert (setup / "settings.py").read_text().startswith(settings)
    out = setup / "output"
    plan = core.load_plan(str(out / "sharding" / "plan.npz"))
    s = plan.settings
    assert (s.num_shards, s.partition_epoch, s.distribution, s.unit) == (2, 2, "equal_steps", "frames")
    assert (s.training_num_epochs, s.preloaded_sub_epochs) == (4, 1)  # 2 passes, and the preloaded sub-epoch
    assert (
        "4 sub-epochs = 2 full epochs; the plan also holds the 1 after them that RETURNN preloads"
        in (out / "sharding" / "report.txt").read_text()
    )
    (train_dir,) = glob.glob(str(setup / "work" / "i6_core" / "returnn" / "training" / "ReturnnTrainingJob.*"))
    training = read_training_logs(sorted(glob.glob(os.path.join(train_dir, "work", "returnn.torch-distrib-*-2.log"))))
    assert training.num_ranks == 2 and training.epochs == [1, 2, 3, 4]
    for rank_log in training.ranks:
        for epoch in training.epochs:
            assert rank_log.sub_epochs[epoch].file_keys == plan.files_for(epoch=epoch, shard_index=rank_log.rank)
    report = (out / "train" / "sharding_report.txt").read_text()
    assert report.count("files as planned") == 2 * 4, report
    assert "Alarms\n  none" in report, report
    assert (out / "train" / "learning_rates").exists()


def _assert_the_plan_has_the_trainings_steps(setup):
    """The plan took the training's batching and sync from its config (ShardPlanJob.for_training): the steps it
    says each rank takes in each sub-epoch (summary.json's steps_taken, simulated exactly) are the steps each rank's
    RETURNN log says it trained, and so the predicted drop is the measured one (within 1e-5: both are rounded to six
    digits); under equal_steps both are zero."""
    from i6_shard.core.io.returnn_log import read_training_logs
    from i6_shard.core.reporting import TRAIN_SUMMARY_FILE

    (plan_dir,) = glob.glob(str(setup / "work" / "**" / "ShardPlanJob.*"), recursive=True)
    with open(os.path.join(plan_dir, "output", "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    (train_dir,) = glob.glob(str(setup / "work" / "i6_core" / "returnn" / "training" / "ReturnnTrainingJob.*"))
    training = read_training_logs(sorted(glob.glob(os.path.join(train_dir, "work", "returnn.torch-distrib-*-2.log"))))
    ranks = sorted(training.ranks, key=lambda r: r.rank)
    logged = [[r.sub_epochs[epoch].trained_steps for r in ranks] for epoch in training.epochs]
    assert training.epochs == [1, 2, 3, 4] and all(None not in steps for steps in logged), logged
    assert summary["steps_taken"][: len(logged)] == logged, (summary["steps_taken"], logged)
    (report_dir,) = glob.glob(str(setup / "work" / "**" / "TrainReportJob.*"), recursive=True)
    with open(os.path.join(report_dir, "output", TRAIN_SUMMARY_FILE), encoding="utf-8") as f:
        measured = json.load(f)["dropped_fraction"]
    assert abs(summary["dropped_fraction_predicted"] - measured) <= 1e-5, (
        summary["dropped_fraction_predicted"],
        measured,
    )
    # The README's figures are this run's: the steps per sub-epoch and the drop, planned and measured.
    _assert_the_readme_says(
        steps=[steps[0] for steps in logged], planned=summary["dropped_fraction_predicted"], measured=measured
    )
    # equal_steps: every rank makes the same steps in every sub-epoch, so nothing is dropped, planned and measured.
    assert all(len(set(steps)) == 1 for steps in logged), logged
    assert summary["dropped_fraction_predicted"] == 0 and measured == 0, (
        summary["dropped_fraction_predicted"],
        measured,
    )


def _assert_the_readme_says(*, steps, planned, measured):
    """The README's sentence on its recipe's training names these steps per sub-epoch and these drops."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())
    said = re.search(
        r"each rank's log shows exactly the plan's steps \(([\d, ]+) per sub-epoch, on both ranks\) and nothing is "
        r"dropped, ([\d.]+)% planned and ([\d.]+)% measured",
        readme,
    )
    assert said, "the README no longer names its recipe's steps and drop"
    run = (steps, round(100 * planned, 2), round(100 * measured, 2))
    readme_says = ([int(n) for n in said.group(1).split(",")], float(said.group(2)), float(said.group(3)))
    assert readme_says == run, f"the README says {readme_says}, the run shows {run}"
