"""``TrainReportJob.for_training`` and the config checks refuse a ``torch_distributed`` RETURNN refuses at start-up,
when the graph is built, instead of reading it as grad sync."""

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip(
    "i6_core.returnn",
    reason="needs i6_core: clone github.com/rwth-i6/i6_core into recipe/ and put recipe/ on PYTHONPATH",
)

from i6_shard.jobs import TrainReportJob  # noqa: E402
from i6_shard.returnn_config import check_returnn_config  # noqa: E402

from .test_train_report import _training  # noqa: E402

JUNK = [
    ({"reduce_type": 0}, ValueError, "torch_distributed reduce_type=0: RETURNN refuses it"),
    ({"reduce_type": ""}, ValueError, "torch_distributed reduce_type='': RETURNN refuses it"),
    ({"sync": [{"group": "world", "type": "junk"}]}, ValueError, "torch_distributed sync level 0 type='junk'"),
    ("yes", TypeError, r"torch_distributed='yes' \(str\): RETURNN needs a dict"),
    ([], TypeError, r"torch_distributed=\[\] \(list\): RETURNN needs a dict"),
    (5, TypeError, r"torch_distributed=5 \(int\): RETURNN needs a dict"),
]


@pytest.mark.parametrize("junk, error, message", JUNK, ids=[repr(j[0]) for j in JUNK])
def test_for_training_refuses_junk_in_torch_distributed(work_dir, junk, error, message):
    training = _training()
    training.returnn_config.config["torch_distributed"] = junk  # as a config edited by hand holds it
    with pytest.raises(error, match=message):
        TrainReportJob.for_training(training)


@pytest.mark.parametrize("junk, error, message", JUNK, ids=[repr(j[0]) for j in JUNK])
def test_the_config_check_names_junk_in_torch_distributed(junk, error, message):
    training = _training()
    config = {**training.returnn_config.config, "torch_distributed": junk}
    with pytest.raises((ValueError, TypeError), match=message):
        check_returnn_config(config, num_ranks=2)
