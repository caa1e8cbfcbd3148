"""The README's recipe as written: its settings.py and config/train.py, extracted from the README, on data from
``python -m i6_shard make-data``, run by the real Sisyphus manager with i6_core and RETURNN (a 2-rank torchrun
training on the CPU). The outputs the README names exist, the plan is what the ranks read, and the training
report finds every rank's files as planned."""

import glob
import os
import shutil
import subprocess
import sys

import pytest

from tests.jobs.conftest import needs_recipe_training, sis_command

needs_recipe_training("the training needs torch")

from i6_shard import core  # noqa: E402
from i6_shard.core.io.returnn_log import read_training_logs  # noqa: E402

from .test_planned_training_example import _returnn_root, run_sis_manager  # noqa: E402

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import setup_tutorial  # noqa: E402

sys.path.pop(0)


def test_the_readme_recipe_trains_and_reports(tmp_path):
    import i6_core

    root, sis = _returnn_root(), sis_command()[0]
    config, settings = setup_tutorial.readme_blocks()  # the README's recipe section
    setup = tmp_path / "setup"
    (setup / "config").mkdir(parents=True)
    (setup / "recipe").mkdir()
    (setup / "work").mkdir()  # as docs/tutorial.md makes it: sis asks for a missing one
    os.symlink(os.path.dirname(os.path.abspath(i6_core.__file__)), setup / "recipe" / "i6_core")
    (setup / "config" / "__init__.py").write_text("")
    (setup / "config" / "train.py").write_text(config)
    (setup / "settings.py").write_text(settings)
    env = dict(os.environ, RETURNN_ROOT=root, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    subprocess.run(
        [sys.executable, "-m", "i6_shard", "make-data", "-o", "data"],
        cwd=setup,
        env=env,
        check=True,
        capture_output=True,
    )
    run_sis_manager(sis, "config/train.py", setup=setup, env=env, log_path=str(tmp_path / "sis.log"))

    out = setup / "output"
    plan = core.load_plan(str(out / "sharding" / "plan.npz"))
    s = plan.settings
    assert (s.num_shards, s.partition_epoch, s.distribution, s.unit) == (2, 2, "balanced", "frames")
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
    for name in ("sharding/plot.png", "train/plot.png"):  # the pictures among the registered outputs
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    shutil.rmtree(setup / "work", ignore_errors=True)  # the training's checkpoints
