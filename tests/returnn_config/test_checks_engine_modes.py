"""The checks state the reason RETURNN itself fails for (a MultiProcDataset 'dedicated' with several workers
around a DistributeFilesDataset with distrib_shard_files fails at start-up, shown here in a real RETURNN
subprocess), and warn where a get_sub_epoch_dataset of the config's own cannot be seen, saying how to confirm."""

import functools
import os
import sys
import warnings

import pytest

from tests.blocking import run_to_end

from tests.deps import needs_torch

from i6_shard.returnn_config import ConfigCheckError, check_dataset_dict, check_returnn_config
from i6_shard.returnn_config.pycode import config_code

#: RETURNN building the train dataset as rank 0 of 2 (the verifier's own start: its load_data, RETURNN's rank).
START_UP = """import sys
from returnn.config import global_config_ctx
from i6_shard.returnn_ext.verify import _load_dataset, load_dataset_dict, simulate_rank

if __name__ == "__main__":
    dataset_dict, config = load_dataset_dict(config_path=sys.argv[1])
    simulate_rank(config, rank=0, num_shards=2)
    with global_config_ctx(config):
        dataset = _load_dataset(dataset_dict, config, config_key="train")
        dataset.init_seq_order(epoch=1)
        dataset.load_seqs(0, 1)
"""
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def filtered_sub_epoch_dataset(files):
    """A user's get_sub_epoch_dataset: an OggZipDataset with an epoch_wise_filter (module-level, so it pickles)."""
    return {
        "class": "OggZipDataset",
        "path": list(files),
        "audio": None,
        "targets": None,
        "seq_ordering": "random",
        "epoch_wise_filter": {(1, 2): {"max_mean_len": 100}},
    }


def _dfd(files, **extra):
    return {
        "class": "DistributeFilesDataset",
        "files": files,
        "get_sub_epoch_dataset": filtered_sub_epoch_dataset,
        "partition_epoch": 2,
        "seq_ordering": "random",
        "distrib_shard_files": True,
        "sharding_fix": True,
        "use_worker_proc": False,
        **extra,
    }


def _dedicated_config(files):
    return {
        "backend": "torch",
        "behavior_version": 37,
        "torch_distributed": {},
        "extern_data": {"data": {"dim": 2}},
        "train": {
            "class": "MultiProcDataset",
            "num_workers": 2,
            "buffer_size": 5,
            "sharding_method": "dedicated",
            "dataset": _dfd(files),
        },
    }


def test_dedicated_multi_proc_around_distrib_shard_files_names_the_start_up_clash():
    with pytest.raises(ConfigCheckError) as err:
        check_returnn_config(_dedicated_config([f"f{i}.hdf" for i in range(8)]), num_ranks=2)
    text = str(err.value)
    assert "at start-up" in text and "clashes with distrib_shard_files" in text and "_num_shards = 1 * 2" in text
    assert "round-robin" not in text


def test_the_plan_of_it_is_refused_for_the_same_one_reason():
    """ShardPlanJob.for_training (and the builders' plan) refuse it with the reason the checks give."""
    from i6_shard.returnn_config.plan import training_plan_options

    config = _dedicated_config([f"f{i}.hdf" for i in range(8)])
    with pytest.raises(ConfigCheckError) as err:
        check_returnn_config(config, num_ranks=2)
    with pytest.raises(ValueError) as plan_err:
        training_plan_options({**config, "batch_size": 100}, num_ranks=2, num_epochs=4, key=("train", "dataset"))
    reason = str(err.value).split("RETURNN would fail: ")[1].strip()
    assert reason in str(plan_err.value) and "clashes with distrib_shard_files" in reason


@pytest.mark.slow  # a RETURNN subprocess that starts the MultiProcDataset's 2 worker processes: several seconds
def test_returnn_fails_at_start_up_for_the_stated_reason(tmp_path):
    """RETURNN, run as rank 0 of 2 (the verifier's runner), fails building the train dataset with the clash."""
    needs_torch("torch_distributed needs torch")
    pytest.importorskip("returnn.datasets.multi_proc", reason="needs RETURNN: pip install returnn")
    from tests.hdf_data import hdf_sub_epoch_dataset, write_tiny_hdf_files

    files = write_tiny_hdf_files(str(tmp_path / "hdf"), num_files=8, seed=1)
    config = tmp_path / "dedicated.config"
    train = _dedicated_config(files)["train"]
    train["dataset"]["get_sub_epoch_dataset"] = functools.partial(hdf_sub_epoch_dataset, seq_ordering="random")
    config.write_text(config_code({**_dedicated_config(files), "train": train}))
    script = tmp_path / "start.py"
    script.write_text(START_UP)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    proc = run_to_end([sys.executable, str(script), str(config)], env=env, cwd=str(tmp_path))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "distrib_shard_files shards the files by the distributed rank 0 / size 2" in out
    assert "which clashes with _num_shards 2 / _shard_index 1" in out


def test_a_sub_epoch_function_over_a_file_list_gets_a_warning_saying_how_to_confirm(tmp_path):
    listed = tmp_path / "files.txt"
    listed.write_text("".join(f"/data/f{i}.hdf\n" for i in range(8)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = check_dataset_dict(_dfd(str(listed)), num_ranks=2, name="train")
    unseen = [w for w in result.warnings if "cannot see" in w]
    assert len(unseen) == 1 and "VerifyShardingJob" in unseen[0] and "epoch_wise_filter" in unseen[0]
    # an inline list lets the checks call it and see the filter: no such warning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seen = check_dataset_dict(_dfd([f"/data/f{i}.hdf" for i in range(8)]), num_ranks=2, name="train")
    assert not [w for w in seen.warnings if "cannot see" in w]
