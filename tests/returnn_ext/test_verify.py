"""The per-rank recorder run in real RETURNN subprocesses, checked with the core: it proves
exactly-once reading with sharding_fix=True and catches RETURNN's double-sharding data loss. (torch's
dataset_distribution="shard", with the records of what each rank read, is verified through VerifyShardingJob in
tests/jobs/test_verify.py, which runs this recorder.)"""

import json
import os
import pickle
import subprocess
import sys

import pytest

from tests.deps import needs_torch

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from i6_shard.core.reporting import verify_records  # noqa: E402
from tests.hdf_data import sharded_dfd, write_tiny_hdf_files  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def hdf_files(tmp_path_factory):
    return write_tiny_hdf_files(str(tmp_path_factory.mktemp("hdf")), num_files=10, seed=1)


def _record(tmp_path, source_args, *, num_shards, epochs):
    ranks = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    for rank in range(num_shards):
        out = str(tmp_path / f"rank-{rank}.json")
        cmd = [
            sys.executable,
            "-m",
            "i6_shard.returnn_ext.verify",
            *source_args,
            "--rank",
            str(rank),
            "--num-shards",
            str(num_shards),
            "--epochs",
            ",".join(map(str, epochs)),
            "--output",
            out,
        ]
        if rank == 0:
            cmd += ["--reference", str(tmp_path / "reference.json")]
        subprocess.run(cmd, check=True, env=env, cwd=str(tmp_path), stdout=subprocess.DEVNULL)
        with open(out) as f:
            ranks.append(json.load(f))
    with open(tmp_path / "reference.json") as f:
        return ranks, json.load(f)


def _pickled(tmp_path, dataset):
    path = str(tmp_path / "dataset.pkl")
    with open(path, "wb") as f:
        pickle.dump(dataset, f)
    return ["--dataset-pickle", path]


def test_sharding_fix_reads_everything_exactly_once(tmp_path, hdf_files):
    ranks, ref = _record(
        tmp_path,
        _pickled(tmp_path, sharded_dfd(hdf_files, partition_epoch=2, sharding_fix=True)),
        num_shards=2,
        epochs=[1, 2, 3, 4],
    )
    violations, report = verify_records(ranks, ref, num_shards=2)
    assert violations == [], report
    assert report.startswith("i6_shard sharding verification: OK")
    # The recorder saw what RETURNN read: every sequence of the data once per full epoch.
    all_tags = sorted(t for tags in ref["file_tags"] for t in tags)
    assert len(all_tags) > 10 and len(set(all_tags)) == len(all_tags)
    for full_epoch in (0, 1):
        read = sorted(
            t for r in ranks for se in r["sub_epochs"] if (se["epoch"] - 1) // 2 == full_epoch for t in se["seq_tags"]
        )
        assert read == all_tags
    assert ranks[1]["settings"]["shard_index"] == 1 and ranks[1]["settings"]["sharding_fix"] is True


@pytest.mark.slow
def test_double_sharding_without_fix_is_caught(tmp_path, hdf_files):
    ranks, ref = _record(
        tmp_path,
        _pickled(tmp_path, sharded_dfd(hdf_files, partition_epoch=2, sharding_fix=False)),
        num_shards=2,
        epochs=[1, 2],
    )
    violations, report = verify_records(ranks, ref, num_shards=2)
    kinds = [v.kind for v in violations]
    # The files are right; the sub-epoch datasets shard them again, so about half the data is lost.
    assert "files" not in kinds and "duplicate" not in kinds
    assert kinds.count("missing") == 1 and kinds.count("seqs") >= 2
    num_all = sum(len(t) for t in ref["file_tags"])
    num_read = sum(len(se["seq_tags"]) for r in ranks for se in r["sub_epochs"])
    assert num_read <= (num_all + 3) // 2
    assert f"{num_all - num_read} of {num_all} sequences were not read by any rank" in report


@pytest.mark.slow
def test_returnn_config_file_and_behavior_version(tmp_path, hdf_files):
    """A config file: its behavior_version decides RETURNN's default (sharding_fix=None)."""
    for behavior_version, ok in ((26, True), (20, False)):
        config = tmp_path / f"returnn-{behavior_version}.config"
        config.write_text(
            "#!rnn.py\n"
            "import functools\n"
            "from tests.hdf_data import hdf_sub_epoch_dataset\n"
            f"behavior_version = {behavior_version}\n"
            f"train = {{'class': 'DistributeFilesDataset', 'files': {hdf_files!r}, 'partition_epoch': 1,\n"
            "         'get_sub_epoch_dataset': functools.partial(hdf_sub_epoch_dataset, seq_ordering='default'),\n"
            "         'distrib_shard_files': True, 'use_worker_proc': False, 'seq_ordering': 'random'}\n"
        )
        ranks, ref = _record(tmp_path, ["--config", str(config)], num_shards=2, epochs=[1])
        violations, report = verify_records(ranks, ref, num_shards=2)
        assert (violations == []) is ok, report


@pytest.mark.slow
def test_unsharded_dataset_fails_on_settings_and_duplicates(tmp_path, hdf_files):
    dataset = sharded_dfd(hdf_files, partition_epoch=2, sharding_fix=None, distrib_shard_files=False)
    ranks, ref = _record(tmp_path, _pickled(tmp_path, dataset), num_shards=2, epochs=[1, 2])
    violations, report = verify_records(ranks, ref, num_shards=2)
    assert [v.kind for v in violations[:2]] == ["settings", "settings"]
    assert "set distrib_shard_files=True" in str(violations[0])
    assert "duplicate" in {v.kind for v in violations}


@pytest.mark.slow
def test_balanced_subclass_with_precomputed_sizes_matches_the_balanced_plan(tmp_path, hdf_files):
    """i6_shard's own dataset class: the verifier plans with the distribution the dataset reports."""
    from i6_shard import core
    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    sizes_path = str(tmp_path / "file_sizes.npz")
    core.save_file_sizes(core.collect_file_sizes(hdf_files), sizes_path)
    dataset = sharded_dfd(hdf_files, partition_epoch=2, distribution="balanced", file_sizes=sizes_path)
    dataset["class"] = ShardedDistributeFilesDataset
    ranks, ref = _record(tmp_path, _pickled(tmp_path, dataset), num_shards=2, epochs=[1, 2])
    assert ranks[0]["settings"]["distribution"] == "balanced"
    violations, report = verify_records(ranks, ref, num_shards=2)
    assert violations == [], report
    # Checked against the balanced plan: RETURNN's own cut differs here, and would be reported.
    ranks[0]["settings"]["distribution"] = ranks[1]["settings"]["distribution"] = "returnn"
    assert {v.kind for v in verify_records(ranks, ref, num_shards=2)[0]} == {"files"}


@pytest.mark.parametrize("ext", ["inline", ".txt", ".json", ".py"])
def test_too_few_files_fail_clearly_before_returnn_runs(tmp_path, ext):
    """5 files cannot fill 2 ranks * 3 sub-epochs: RETURNN alone fails with a bare assert."""
    from i6_shard import core
    from i6_shard.returnn_ext.verify import check_dataset_files

    files = [f"/data/f{i}.hdf" for i in range(5)]
    if ext != "inline":
        files_path = str(tmp_path / f"files{ext}")
        core.write_file_list(files, files_path)
        files = files_path
    dataset = sharded_dfd(files, partition_epoch=3)
    with pytest.raises(ValueError, match=r"5 files cannot fill num_shards\*partition_epoch=2\*3=6 bins.*at most 2"):
        check_dataset_files(dataset, num_shards=2)
    check_dataset_files(dataset, num_shards=1)
    # Without distrib_shard_files (or with one rank) the files are not sharded: 5 fill 3 sub-epochs, not 6.
    check_dataset_files(dict(dataset, distrib_shard_files=False), num_shards=2)
    with pytest.raises(ValueError, match="5 files cannot fill num_shards\\*partition_epoch=1\\*6=6 bins"):
        check_dataset_files(dict(dataset, partition_epoch=6), num_shards=1)


def test_runner_reports_too_few_files_in_a_list_file(tmp_path, hdf_files):
    list_path = str(tmp_path / "files.txt")
    with open(list_path, "w") as f:
        f.write("\n".join(hdf_files[:5]) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    source = _pickled(tmp_path, sharded_dfd(list_path, partition_epoch=3))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "i6_shard.returnn_ext.verify",
            *source,
            "--rank",
            "1",
            "--num-shards",
            "2",
            "--epochs",
            "1",
            "--output",
            str(tmp_path / "rank-1.json"),
        ],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].startswith(
        "ValueError: 5 files cannot fill num_shards*partition_epoch=2*3=6 bins"
    )
    assert not os.path.exists(tmp_path / "rank-1.json")


def _config_file(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(
        "#!rnn.py\nimport functools\nfrom tests.hdf_data import hdf_sub_epoch_dataset\n"
        "def dfd(files, **extra):\n"
        "    return {'class': 'DistributeFilesDataset', 'files': files, 'partition_epoch': 2,\n"
        "            'get_sub_epoch_dataset':\n"
        "                functools.partial(hdf_sub_epoch_dataset, seq_ordering='random'),\n"
        "            'use_worker_proc': False, 'seq_ordering': 'random', 'sharding_fix': True, **extra}\n" + body
    )
    return ["--config", str(path)]


@pytest.mark.slow  # a RETURNN subprocess through torch's DataLoader: several seconds
@pytest.mark.parametrize("offset, ok", [("", False), (", random_seed_offset=0", True)])
def test_a_dfd_inside_a_wrapper_is_found_and_verified(tmp_path, hdf_files, offset, ok):
    """Inside CombinedDataset a sharded DFD takes the wrapper's per-rank seed unless it sets its own."""
    needs_torch("torch_distributed needs torch")
    source = _config_file(
        tmp_path,
        f"combined{int(ok)}.config",
        "torch_distributed = {}\n"
        "train = {'class': 'CombinedDataset', 'seq_ordering': 'interleave',\n"
        "         'data_map': {('asr', 'data'): 'data'},\n"
        f"         'datasets': {{'asr': dfd({hdf_files!r}, distrib_shard_files=True{offset})}}}}\n",
    )
    ranks, ref = _record(tmp_path, source + ["--key-path", '["train", "datasets", "asr"]'], num_shards=2, epochs=[1, 2])
    violations, report = verify_records(ranks, ref, num_shards=2)
    assert ranks[0]["settings"]["key_path"] == ["train", "datasets", "asr"]
    assert (violations == []) is ok, report
    if not ok:
        assert "ranks disagree on random_seed_offset" in report


@pytest.mark.slow
def test_flexible_bound_travels_from_the_dataset_into_the_checked_plan(tmp_path):
    """The recorder takes the bound from ShardedDistributeFilesDataset and the check plans with it: a
    file of three times the others' size makes the bins of bound 0.05 differ from the default's."""
    from i6_shard import core
    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    files = write_tiny_hdf_files(
        str(tmp_path / "hdf"),
        num_files=10,
        seed=1,
        frames=(40, 40),
        dim=8,
        seqs_per_file=[3, 1, 4, 2, 5, 200, 3, 2, 4, 1],
    )
    sizes = core.collect_file_sizes(files).sizes
    layouts = [
        core.ShardPlan(
            files,
            sizes,
            core.PlanSettings(num_shards=2, partition_epoch=2, distribution="flexible", max_sub_epoch_deviation=d),
        ).layout(full_epoch_0idx=0)
        for d in (0.05, 0.25)
    ]
    assert layouts[0][1].tolist() != layouts[1][1].tolist()  # else this test could not tell the bounds apart
    dataset = sharded_dfd(
        files,
        partition_epoch=2,
        **{"class": ShardedDistributeFilesDataset, "distribution": "flexible", "max_sub_epoch_deviation": 0.05},
    )
    ranks, ref = _record(tmp_path, _pickled(tmp_path, dataset), num_shards=2, epochs=[1, 2])
    assert ranks[0]["settings"]["max_sub_epoch_deviation"] == 0.05
    violations, report = verify_records(ranks, ref, num_shards=2)
    assert violations == [], report


@pytest.mark.parametrize(
    "extra, ok",
    [
        ("behavior_version = 26\n", False),  # the DataLoader worker does not get 26: sharding_fix is off there
        ("behavior_version = 31\n", True),
        ("behavior_version = 26\npropagate_behavior_version_to_subprocs = True\n", True),
        ("behavior_version = 26\ntorch_dataloader_opts = {'num_workers': 0}\n", True),
    ],
)
@pytest.mark.slow  # a RETURNN subprocess through torch's DataLoader: several seconds
def test_reads_through_the_engines_dataloader_worker(tmp_path, hdf_files, extra, ok):
    """Under the torch backend the data is read in the engine's DataLoader worker, which RETURNN hands the
    behavior version only from 31: behavior_version 26-30 without sharding_fix double-shards there."""
    needs_torch("the torch engine's DataLoader needs torch")
    source = _config_file(
        tmp_path,
        f"loader{len(extra)}.config",
        "backend = 'torch'\ntorch_distributed = {}\n"
        + extra
        + f"train = dfd({hdf_files!r}, distrib_shard_files=True, sharding_fix=None)\n",
    )
    ranks, ref = _record(tmp_path, source, num_shards=2, epochs=[1, 2])
    violations, report = verify_records(ranks, ref, num_shards=2)
    assert (violations == []) is ok, report
    assert [r["read_by"] for r in ranks] == ["torch DataLoader"] * 2
    if not ok:
        assert {v.kind for v in violations} >= {"seqs", "missing"} and "files" not in {v.kind for v in violations}
