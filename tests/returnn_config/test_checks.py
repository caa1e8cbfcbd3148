"""Checks before queueing: each pitfall is caught with a message naming the fix, all at once;
the sharding_fix version boundary agrees with RETURNN itself."""

import inspect
import os
import subprocess
import warnings

import pytest

from i6_shard.returnn_config import ConfigCheckError, check_dataset_dict, check_returnn_config, sharded_files_dataset
from i6_shard.returnn_config.checks import SHARDING_FIX_RETURNN_VERSION
from i6_shard.returnn_config.checks import check_returnn_version
from i6_shard.returnn_config.checks import parse_returnn_version
from i6_shard.returnn_config import ConfigCheckWarning
from i6_shard.returnn_config.checks import returnn_version_info
from i6_shard.returnn_config.checks import MIN_RETURNN_VERSION, SHARDING_FIX_RETURNN_COMMIT

HDF = {"class": "HDFDataset", "seq_ordering": "random"}
#: Environment variable naming a git clone of RETURNN with its full history (normal or bare).
RETURNN_GIT_ENV = "I6_SHARD_RETURNN_GIT"


def _dfd(**kwargs):
    d = {
        "class": "DistributeFilesDataset",
        "files": [f"{i}.hdf" for i in range(8)],
        "partition_epoch": 2,
        "get_sub_epoch_dataset": sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=1)[
            "get_sub_epoch_dataset"
        ],
    }
    d.update(kwargs)
    return d


def test_sharding_fix_false_and_missing():
    with pytest.raises(ConfigCheckError, match="sharding_fix=False keeps RETURNN's legacy double sharding"):
        check_dataset_dict(_dfd(distrib_shard_files=True, sharding_fix=False))
    with pytest.raises(ConfigCheckError, match="without sharding_fix: below behavior_version 26"):
        check_dataset_dict(_dfd(distrib_shard_files=True))
    check_dataset_dict(_dfd(distrib_shard_files=True), behavior_version=31)
    check_dataset_dict(_dfd(distrib_shard_files=True, sharding_fix=True))


@pytest.mark.parametrize("version", [26, 30])
def test_behavior_version_26_to_30_does_not_reach_the_dataloader_worker(version):
    """RETURNN's torch engine reads the data in a DataLoader worker (num_workers defaults to 1), which gets
    the behavior version only from 31 (SubProcCopyGlobalConfigPreInitFunc): sharding_fix is off there."""
    torch = {"backend": "torch", "torch_distributed": {}, "behavior_version": version}
    with pytest.raises(ConfigCheckError, match=f"torch DataLoader worker.*behavior_version {version} does not apply"):
        check_dataset_dict(_dfd(distrib_shard_files=True), num_ranks=2, config=torch)
    with pytest.raises(ConfigCheckError, match="MultiProcDataset worker"):
        check_returnn_config(
            {
                **torch,
                "torch_dataloader_opts": {"num_workers": 0},
                "train": {
                    "class": "MultiProcDataset",
                    "num_workers": 1,
                    "sharding_method": "dedicated",
                    "dataset": _dfd(distrib_shard_files=True),
                },
            },
            num_ranks=2,
        )
    for fine in (
        {"propagate_behavior_version_to_subprocs": True},
        {"torch_dataloader_opts": {"num_workers": 0}},
        {"torch_dataloader_opts": {"multiprocessing_context": "fork"}},
        {"behavior_version": 31},
        {
            "backend": "tensorflow",
            "torch_distributed": None,
            "use_horovod": True,
            "horovod_dataset_distribution": "random_seed_offset",
        },
    ):
        check_dataset_dict(_dfd(distrib_shard_files=True), num_ranks=2, config={**torch, **fine})
    with pytest.raises(ConfigCheckError, match="multiprocessing_context='spawn'"):
        check_dataset_dict(
            _dfd(distrib_shard_files=True),
            num_ranks=2,
            config={**torch, "behavior_version": 31, "torch_dataloader_opts": {"multiprocessing_context": "spawn"}},
        )
    check_dataset_dict(_dfd(distrib_shard_files=True, sharding_fix=True), num_ranks=2, config=torch)


@pytest.mark.parametrize("key", ["random_seed_offset", "fixed_random_seed"])
def test_fixed_seeds_only_matter_unsharded_with_several_ranks(key):
    with pytest.raises(ConfigCheckError, match=f"{key}=5 is fixed.*every rank then shuffles the same way"):
        check_dataset_dict(_dfd(**{key: 5}, seq_ordering="random"), num_ranks=4)
    check_dataset_dict(_dfd(**{key: 5}, seq_ordering="random"), num_ranks=1)
    check_dataset_dict(
        _dfd(**{key: 5}, seq_ordering="random", distrib_shard_files=True, sharding_fix=True), num_ranks=4
    )


def test_dataset_distribution_shard_is_sharded_with_one_seed():
    """RETURNN gives the train dataset _num_shards/_shard_index and every rank the same seed, so a fixed
    random_seed_offset is right there (it was reported as "every rank reads the same data")."""
    shard = {"torch_distributed": {"dataset_distribution": "shard"}}
    d = _dfd(random_seed_offset=5, seq_ordering="random", sharding_fix=True)
    result = check_dataset_dict(d, num_ranks=4, config=shard)
    assert [r.mechanism for r in result.datasets] == ["dataset_distribution shard"]
    check_returnn_config({**shard, "backend": "torch", "train": d}, num_ranks=4)
    with pytest.raises(ConfigCheckError, match="torch_distributed dataset_distribution='shard' without sharding_fix"):
        check_returnn_config({**shard, "train": _dfd(seq_ordering="random")}, num_ranks=2)
    with pytest.raises(ConfigCheckError, match="8 files cannot fill num_shards\\*partition_epoch=8\\*2=16"):
        check_returnn_config({**shard, "train": d}, num_ranks=8)


def test_explicit_num_shards_in_the_sub_epoch_dataset_is_no_double_sharding():
    explicit = sharded_files_dataset(
        ["a"], sub_epoch_dataset={**HDF, "_num_shards": 1, "_shard_index": 0}, partition_epoch=1
    )["get_sub_epoch_dataset"]
    check_dataset_dict(_dfd(distrib_shard_files=True, get_sub_epoch_dataset=explicit), num_ranks=2)
    with pytest.raises(ConfigCheckError, match="without sharding_fix"):
        check_dataset_dict(_dfd(distrib_shard_files=True), num_ranks=2)


def test_wrapped_dfds_are_checked_and_named_by_key_path():
    wrapped = {
        "class": "CombinedDataset",
        "seq_ordering": "interleave",
        "data_map": {("asr", "data"): "data", ("lm", "data"): "text"},
        "datasets": {
            "asr": _dfd(distrib_shard_files=True, sharding_fix=False, random_seed_offset=0),
            "lm": _dfd(distrib_shard_files=True, sharding_fix=True, seq_ordering="random"),
        },
    }
    with pytest.raises(ConfigCheckError) as info:
        check_returnn_config({"torch_distributed": {}, "train": wrapped}, num_ranks=2)
    problems = info.value.problems
    assert len(problems) == 2, problems
    assert problems[0].startswith("train.datasets.asr: sharding_fix=False keeps RETURNN's legacy double sharding")
    assert problems[1].startswith(
        "train.datasets.lm: the files are sharded (distrib_shard_files=True), but every "
        "rank shuffles them with its own seed"
    )
    assert "Set 'random_seed_offset': 0 in this dataset dict" in problems[1]
    with pytest.raises(ConfigCheckError, match="train.dataset: RETURNN would fail: MultiProcDataset's sharding_method"):
        check_dataset_dict(
            {
                "class": "MultiProcDataset",
                "num_workers": 2,
                "buffer_size": 2,
                "dataset": _dfd(distrib_shard_files=True, sharding_fix=True),
            },
            name="train",
        )


def test_a_dict_without_dfd_is_reported_as_such():
    with pytest.raises(
        ConfigCheckError,
        match=r"dev: no DistributeFilesDataset in this dataset dict \(class "
        r"'MetaDataset', nor inside it\)",
    ):
        check_dataset_dict(
            {"class": "MetaDataset", "datasets": {"a": {"class": "HDFDataset"}}, "data_map": {"data": ("a", "data")}},
            name="dev",
        )
    result = check_returnn_config({"train": {"class": "HDFDataset", "files": ["a.hdf"]}})
    assert result.datasets == () and any("no DistributeFilesDataset in the config" in w for w in result.warnings)


def test_eval_datasets_and_horovod():
    # dev/eval: RETURNN's default seq_ordering there is "sorted"; torch evaluates on rank 0 only.
    with pytest.raises(ConfigCheckError, match="dev: seq_ordering='sorted' \\(RETURNN's default for dev/eval"):
        check_returnn_config({"dev": _dfd()})
    check_returnn_config(
        {"torch_distributed": {}, "dev": _dfd(seq_ordering="default", fixed_random_seed=1)}, num_ranks=2
    )  # evaluated on rank 0 only: no per-rank rule
    with pytest.raises(ConfigCheckError, match="dev: distrib_shard_files=True on an eval dataset"):
        check_returnn_config(
            {"torch_distributed": {}, "dev": _dfd(seq_ordering="default", distrib_shard_files=True, sharding_fix=True)},
            num_ranks=2,
        )
    with pytest.raises(ConfigCheckError, match="horovod_dataset_distribution='shard' \\(RETURNN's default\\)"):
        check_returnn_config(
            {"use_horovod": True, "train": _dfd(distrib_shard_files=True, sharding_fix=True)}, num_ranks=2
        )
    check_returnn_config(
        {
            "use_horovod": True,
            "horovod_dataset_distribution": "random_seed_offset",
            "train": _dfd(distrib_shard_files=True, sharding_fix=True),
        },
        num_ranks=2,
    )


def test_bound_template_is_checked_and_problems_come_together():
    from i6_shard.returnn_config.sub_epoch import bind_sub_epoch_dataset

    bad = _dfd(
        distrib_shard_files=True,
        sharding_fix=False,
        get_sub_epoch_dataset=bind_sub_epoch_dataset({"class": "HDFDataset", "partition_epoch": 3}),
    )
    with pytest.raises(ConfigCheckError) as info:
        check_dataset_dict(bad, num_ranks=8, name="train")
    problems = info.value.problems
    assert len(problems) == 4, problems
    assert any("sharding_fix=False" in p for p in problems)
    assert any("8 files cannot fill num_shards*partition_epoch=8*2=16 bins" in p for p in problems)
    assert any("partition_epoch=3" in p for p in problems)
    assert any("no explicit seq_ordering" in p for p in problems)


def test_horovod_without_torch_distributed_under_torch():
    with pytest.raises(ConfigCheckError, match="set torch_distributed = {}"):
        check_returnn_config({"backend": "torch", "use_horovod": True}, num_ranks=2)
    check_returnn_config({"backend": "torch", "torch_distributed": {}}, num_ranks=2)
    check_returnn_config({"backend": "torch"}, num_ranks=1)
    check_returnn_config({"backend": "tensorflow", "use_horovod": True}, num_ranks=2)


def test_returnn_config_checks_every_dfd_in_it():
    config = {
        "backend": "torch",
        "torch_distributed": {},
        "train": _dfd(distrib_shard_files=True, sharding_fix=True),
        "extra_train": _dfd(fixed_random_seed=1, seq_ordering="random"),
        "other": {"class": "HDFDataset", "fixed_random_seed": 1},
    }
    result = check_returnn_config(config, num_ranks=2)  # extra_train: no train defaults, no rank rule
    assert [r.name for r in result.datasets] == ["train", "extra_train"]
    with pytest.raises(ConfigCheckError, match=r"(?s)1 problem.*train: fixed_random_seed=1"):
        check_returnn_config({**config, "train": config["extra_train"]}, num_ranks=2)


def test_version_boundary():
    """The minimum is the first release with distrib_shard_files; every later one passes the version check (what a
    release lacks beyond that is judged per dataset, tests/returnn_config/test_release.py)."""
    assert parse_returnn_version(SHARDING_FIX_RETURNN_VERSION) == (1, 20260611, 14531)
    assert MIN_RETURNN_VERSION == "1.20240620.64807"
    for newer in (MIN_RETURNN_VERSION, "1.20240620.064807", "1.20250115.110555", "1.20261022.211313+git.a6e5adc"):
        check_returnn_version(newer)
    check_returnn_version(None)
    for older in ("1.20240620.64806", "1.20240101.120000+git.0000000"):
        with pytest.raises(
            ConfigCheckError,
            match=f"predates what i6_shard needs: .*distrib_shard_files.*install RETURNN >= {MIN_RETURNN_VERSION}",
        ):
            check_returnn_version(older)
    with pytest.raises(ValueError, match="not of the form 1.YYYYMMDD.HHMMSS"):
        check_returnn_version("latest")
    with pytest.raises(ConfigCheckError, match="predates"):
        check_returnn_config({}, returnn_version="1.20240101.120000")


def test_installed_returnn_has_sharding_fix_and_is_new_enough():
    import returnn
    from returnn.datasets.distrib_files import DistributeFilesDataset

    assert "sharding_fix" in inspect.signature(DistributeFilesDataset.__init__).parameters
    check_returnn_version(returnn.__version__)
    root = os.path.dirname(os.path.dirname(returnn.__file__))
    assert returnn_version_info(root)[0] == returnn.__version__


def _returnn_git_checkout() -> str:
    path = os.environ.get(RETURNN_GIT_ENV)
    if not path:
        pytest.skip(
            f"set {RETURNN_GIT_ENV} to a git clone of RETURNN (github.com/rwth-i6/returnn, full history) "
            "to check SHARDING_FIX_RETURNN_VERSION against RETURNN's history"
        )
    out = subprocess.run(["git", "-C", path, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True)
    if out.returncode != 0 or out.stdout.strip() != "false":
        pytest.fail(f"{RETURNN_GIT_ENV}={path!r} is not a git clone with full history: {out.stderr.strip()}")
    return path


def test_version_constant_matches_returnn_history():
    checkout = _returnn_git_checkout()

    def git(*args):
        return subprocess.run(["git", "-C", checkout, *args], capture_output=True, text=True, check=True).stdout

    first = git("log", "-S", "sharding_fix", "--format=%H", "--", "returnn/datasets/distrib_files.py").split()[-1]
    assert first == SHARDING_FIX_RETURNN_COMMIT
    date = git("show", "-s", "--format=%ci", first).strip()  # RETURNN's own git_commit_date recipe
    assert "1." + date[:-6].replace(":", "").replace("-", "").replace(" ", ".") == SHARDING_FIX_RETURNN_VERSION
    assert "sharding_fix" not in git("show", f"{first}~1:returnn/datasets/distrib_files.py")


def test_returnn_version_of_git_checkout(tmp_path):
    date = "2026-06-12 10:11:12 +0200"
    env = {
        **os.environ,
        "GIT_COMMITTER_DATE": date,
        "GIT_AUTHOR_DATE": date,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=env)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "x"], check=True, env=env)
    assert returnn_version_info(str(tmp_path))[0] is None  # a git repository, but not RETURNN's
    (tmp_path / "returnn").mkdir()
    (tmp_path / "returnn" / "__init__.py").write_text("")
    assert returnn_version_info(str(tmp_path / "."))[0] == "1.20260612.101112"
    assert returnn_version_info(str(tmp_path / "missing"))[0] is None
    assert returnn_version_info(None)[0] is None


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: check_dataset_dict(_dfd(), num_ranks=0), ValueError, r"num_ranks=0 must be a positive int"),
        (lambda: check_dataset_dict(_dfd(), num_ranks="2"), TypeError, r"num_ranks='2' has type str"),
        (lambda: check_dataset_dict(_dfd(), behavior_version="26"), TypeError, r"behavior_version='26' has type str"),
        (lambda: check_dataset_dict(["a"]), TypeError, r"dataset has type list; .*a dataset dict"),
        (lambda: check_returnn_config({}, num_ranks=-1), ValueError, r"num_ranks=-1 must be a positive int"),
        (lambda: check_returnn_config([], num_ranks=1), TypeError, r"config has type list; .*a RETURNN config dict"),
        (
            lambda: check_returnn_config({}, returnn_version=1.2026),
            TypeError,
            r"returnn_version=1\.2026 has type float; give RETURNN's version string",
        ),
        (lambda: check_returnn_version(20260611), TypeError, r"returnn_version=20260611 has type int"),
    ],
)
def test_check_arguments_are_checked(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_returnn_without_readable_version_skips_the_check_and_says_why(tmp_path):
    """A copy of the real RETURNN without _setup_info_generated.py and git metadata reports 1.0.0:
    unknown, not old; the check passes with a warning naming why it was skipped."""
    import shutil
    import sys

    import returnn

    root = tmp_path / "returnn_export"
    shutil.copytree(
        os.path.dirname(returnn.__file__),
        root / "returnn",
        ignore=shutil.ignore_patterns("__pycache__", "_setup_info_generated.py"),
    )
    out = subprocess.run(
        [sys.executable, "-c", "import returnn; print(returnn.__version__)"],
        cwd=str(root),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    reported = out.stdout.strip().splitlines()[-1]
    assert reported == "1.0.0"
    with pytest.warns(ConfigCheckWarning, match="RETURNN reports version 1.0.0, its fallback"):
        result = check_returnn_version(reported)
    assert len(result.warnings) == 1
    version, reason = returnn_version_info(str(root))
    assert version is None and "no git metadata" in reason, reason
    with pytest.warns(ConfigCheckWarning, match="the RETURNN version is unknown .*no git metadata.*was not checked"):
        result = check_returnn_config({}, returnn_root=str(root))
    assert any(MIN_RETURNN_VERSION in w and "not checked" in w for w in result.warnings)
    assert returnn_version_info(str(root))[0] is None
    # Given, but unreadable: the check says so too (a warning, not an error).
    assert "returnn_root" in returnn_version_info(str(tmp_path / "nope"))[1]
    assert "was not given" in check_returnn_version(None).warnings[0]


def _user_sub_epoch(files):
    return {"class": "HDFDataset", "files": files, "seq_ordering": "random"}


def test_a_sub_epoch_dict_that_cannot_be_told_is_a_warning_naming_verify_sharding_job():
    d = {
        "class": "DistributeFilesDataset",
        "files": "files.txt",
        "partition_epoch": 2,
        "distrib_shard_files": True,
        "get_sub_epoch_dataset": _user_sub_epoch,
    }
    with pytest.warns(ConfigCheckWarning, match="VerifyShardingJob"):
        result = check_dataset_dict(d, num_ranks=2)
    assert any("VerifyShardingJob" in w for w in result.warnings)
    with pytest.raises(ConfigCheckError, match="without sharding_fix"):  # told: an error as before
        check_dataset_dict(dict(d, files=["a.hdf", "b.hdf", "c.hdf", "d.hdf"]), num_ranks=2)
    # with the fix the sub-epoch dataset cannot shard again, but what else it does (an epoch_wise_filter, other
    # files) is still unseen: a note in the check's report saying how to confirm, none about sharding_fix, and no
    # warning (such a config is as likely right as wrong)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigCheckWarning)
        noted = check_dataset_dict(dict(d, sharding_fix=True), num_ranks=2).warnings
    assert len(noted) == 1 and "VerifyShardingJob" in noted[0] and "sharding_fix" not in noted[0]


def test_unseen_sub_epoch_datasets_are_noted_once_in_the_report():
    """Two DistributeFilesDatasets over file lists with a sub-epoch function of the config: one note naming both."""
    dfd = {
        "class": "DistributeFilesDataset",
        "files": "files.txt",
        "partition_epoch": 2,
        "distrib_shard_files": True,
        "sharding_fix": True,
        "get_sub_epoch_dataset": _user_sub_epoch,
    }
    dev = dict(dfd, files="dev.txt", distrib_shard_files=False, seq_ordering="default")
    config = {"backend": "torch", "torch_distributed": {}, "train": dfd, "dev": dev}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigCheckWarning)
        result = check_returnn_config(config, num_ranks=2, returnn_version="1.20261022.211313")
    noted = [w for w in result.warnings if "cannot see" in w]
    assert len(noted) == 1 and "train (" in noted[0] and "dev (" in noted[0], result.warnings


def test_epoch_wise_filter_in_the_sub_epoch_dataset_is_a_warning():
    sub = {**HDF, "epoch_wise_filter": {(1, 4): {"max_mean_len": 50}}}
    d = _dfd(
        get_sub_epoch_dataset=sharded_files_dataset(["a"], sub_epoch_dataset=sub, partition_epoch=1)[
            "get_sub_epoch_dataset"
        ],
        sharding_fix=True,
        distrib_shard_files=True,
    )
    with pytest.warns(ConfigCheckWarning, match="epoch_wise_filter, which sees full epochs"):
        check_dataset_dict(d, num_ranks=2)
