"""Placement into the real i6_core: ReturnnTrainingJob built by the helper writes its files, RETURNN
loads the written returnn.config and builds the dataset per rank; hashes are pinned."""

import collections
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

pytest.importorskip(
    "sisyphus.job",
    reason="needs the real Sisyphus: pip install it from its source repository "
    "(github.com/rwth-i6/sisyphus); the PyPI package 'sisyphus' is unrelated",
)
pytest.importorskip(
    "i6_core.returnn",
    reason="needs i6_core: clone github.com/rwth-i6/i6_core into recipe/ and put "
    "recipe/ on PYTHONPATH (its returnn package imports librosa, "
    "soundfile, h5py and black, see its requirements.txt)",
)

from i6_core.returnn.config import CodeWrapper, ReturnnConfig, ReturnnConfigV2  # noqa: E402
from i6_core.returnn.training import ReturnnTrainingJob  # noqa: E402
from sisyphus import gs, tk  # noqa: E402
from sisyphus.hash import short_hash, sis_hash_helper  # noqa: E402

from i6_shard.core import PlanSettings, ShardPlan, collect_file_sizes, save_file_sizes, write_file_list  # noqa: E402
from i6_shard.returnn_config import ConfigCheckError, sharded_files_dataset  # noqa: E402
from i6_shard.returnn_config.i6core import (  # noqa: E402
    DelayedSubEpochPartial,
    I6ShardImportCode,
    SubEpochDatasetCode,
    add_sharded_dataset,
    sharded_returnn_config,
    training_job,
    training_job_kwargs,
)

from ..strategies import file_names  # noqa: E402
from .fresh_python import load_config_code, run_without_i6_shard  # noqa: E402
from ..hdf_data import file_index, iterate_tags, write_tiny_hdf_files  # noqa: E402
from tests.deps import RETURNN_REASON, SISYPHUS_REASON

HDF = {"class": "HDFDataset", "seq_ordering": "random"}
BASE_CONFIG = {"backend": "torch", "behavior_version": 24, "batch_size": 1000}
EXE = dict(returnn_python_exe=tk.Path("/usr/bin/python3"), returnn_root=tk.Path("/opt/returnn"))
NUM_GPUS, PARTITION_EPOCH = 2, 2

#: Pinned Sisyphus hashes: a change here changes the hash of every user's training job.
PINNED_JOB_IDS = {
    "v2": "i6_core/returnn/training/ReturnnTrainingJob.ioPPFCSjJJeS",
    "classic": "i6_core/returnn/training/ReturnnTrainingJob.vnMv4S5FPvq4",
}
PINNED_DATASET_HASH = "dwlXiuYCMBG2"


def _hash_dataset():
    return sharded_files_dataset(
        tk.Path("/data/corpus/files.json"), sub_epoch_dataset=HDF, partition_epoch=PARTITION_EPOCH
    )


def _train(tmp_path, flavour):
    files = write_tiny_hdf_files(str(tmp_path / "data"), num_files=9, seed=5, names=[f"x'{i}\".hdf" for i in range(9)])
    if flavour == "v2":
        # As from ComputeFileSizesJob: a list file and stored sizes, both Sisyphus paths; balanced bins.
        list_file, sizes_file = str(tmp_path / "files.json"), str(tmp_path / "sizes.npz")
        write_file_list(files, list_file)
        save_file_sizes(collect_file_sizes(files), sizes_file)
        pytest.importorskip("i6_shard.returnn_ext.distrib_files", reason=RETURNN_REASON)
        train = sharded_files_dataset(
            tk.Path(list_file),
            sub_epoch_dataset=HDF,
            partition_epoch=PARTITION_EPOCH,
            file_sizes=tk.Path(sizes_file),
            distribution="balanced",
            use_worker_proc=False,
        )
        return files, train, "balanced"
    train = sharded_files_dataset(
        [tk.Path(f) for f in files],
        sub_epoch_dataset=HDF,
        partition_epoch=PARTITION_EPOCH,
        num_shards=NUM_GPUS,
        use_worker_proc=False,
    )
    return files, train, "returnn"


@pytest.mark.parametrize("flavour", ["v2", "classic"])
def test_training_job_create_files_then_returnn_builds_dataset_per_rank(tmp_path, monkeypatch, flavour):
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    monkeypatch.setattr(gs, "WORK_DIR", str(tmp_path / "work"))
    files, train, distribution = _train(tmp_path, flavour)
    rc = sharded_returnn_config(BASE_CONFIG, train, v2=flavour == "v2", black_formatting=flavour == "classic")
    job = training_job(rc, num_gpus=NUM_GPUS, num_epochs=4, **EXE)
    assert isinstance(job, ReturnnTrainingJob)
    job._sis_setup_directory()
    work = job._sis_path(gs.JOB_WORK_DIR)
    os.makedirs(work, exist_ok=True)
    monkeypatch.chdir(work)
    job.create_files()

    rnn_sh = open("rnn.sh").read()
    assert "-mtorch.distributed.run" in rnn_sh and f"--nproc-per-node={NUM_GPUS}" in rnn_sh
    config_path = job.out_returnn_config_file.get_path()
    sizes = collect_file_sizes(files)
    plan = ShardPlan(
        sizes.keys,
        sizes.sizes,
        PlanSettings(num_shards=NUM_GPUS, partition_epoch=PARTITION_EPOCH, distribution=distribution),
    )
    seen = collections.Counter()
    for rank in range(NUM_GPUS):
        config = Config()
        config.load_file(config_path)
        assert config.typed_value("torch_distributed") == {} and config.bool("use_horovod", False)
        train_loaded = config.typed_value("train")
        assert train_loaded["sharding_fix"] is True and train_loaded["distrib_shard_files"] is True
        assert isinstance(train_loaded["files"], (str, list)) and "Path" not in repr(train_loaded["files"])
        config.typed_dict["__debug_dummy_distributed_rank_and_size"] = (rank, NUM_GPUS)  # what torchrun gives
        with global_config_ctx(config):
            dataset = init_dataset(train_loaded)
            for epoch in range(1, PARTITION_EPOCH + 1):
                tags = iterate_tags(dataset, epoch)
                seen.update(tags)
                assert {files[file_index(t)] for t in tags} == set(plan.files_for(epoch=epoch, shard_index=rank))
            dataset.finish_epoch(free_resources=True)
    assert len(seen) > 9 and set(seen.values()) == {1}  # one full epoch over both ranks: each seq once


def test_job_ids_pinned(tmp_path):
    for flavour, v2 in (("v2", True), ("classic", False)):
        rc = sharded_returnn_config(BASE_CONFIG, _hash_dataset(), v2=v2)
        job = training_job(rc, num_gpus=NUM_GPUS, num_epochs=8, **EXE)
        assert job._sis_id() == PINNED_JOB_IDS[flavour], flavour
        # Not hashed: num_epochs (i6_core), the launch command; so continuing a training keeps the id.
        assert training_job(rc, num_gpus=NUM_GPUS, num_epochs=20, **EXE)._sis_id() == job._sis_id()


def test_dataset_hash_pinned_and_independent_of_install_location(monkeypatch):
    train = _hash_dataset()
    assert short_hash(train) == PINNED_DATASET_HASH
    # V2 keeps the dict; its delayed wrapper hashes exactly like the bare partial.
    rc = sharded_returnn_config({}, train, v2=True)
    assert isinstance(rc, ReturnnConfigV2)
    assert isinstance(rc.config["train"]["get_sub_epoch_dataset"], DelayedSubEpochPartial)
    assert sis_hash_helper(rc.config["train"]) == sis_hash_helper(train)
    # The prolog code knows where i6_shard lives, the hash does not. V2: the prolog is not hashed.
    (import_code,) = [p for p in [rc.python_prolog] if isinstance(p, I6ShardImportCode)]
    assert rc.python_prolog_hash is None
    add_sharded_dataset(rc, train, key="dev")
    assert rc.python_prolog is import_code  # once, however many datasets
    # Classic: the prolog holds the code, its hash covers only names and bound arguments.
    classic = sharded_returnn_config({}, train, v2=False)
    (prolog,) = [p for p in [classic.python_prolog] if isinstance(p, SubEpochDatasetCode)]
    import i6_shard.returnn_config.pycode as pycode

    hashes = sis_hash_helper(rc), sis_hash_helper(classic)
    monkeypatch.setattr(pycode, "i6_shard_root", lambda: "/somewhere/else")
    for code in (prolog.get(), import_code.get()):
        assert "sys.path.insert(0, '/somewhere/else')" in code
    monkeypatch.setattr(pycode, "i6_shard_root", lambda: "/venv/lib/python3.11/site-packages")
    for code in (prolog.get(), import_code.get()):
        assert "__import__('i6_shard')" in code and "sys.path" not in code.split("raise ImportError")[0]
    assert (sis_hash_helper(rc), sis_hash_helper(classic)) == hashes


@pytest.mark.parametrize(
    "flavour, install",
    [("v2", "checkout_on_default_path"), ("classic", "checkout_on_default_path"), ("v2", "site_packages")],
)
def test_written_config_imports_i6_shard_in_returnns_python(tmp_path, monkeypatch, flavour, install):
    """The config is written by the manager's Python and loaded by RETURNN's, which lacks i6_shard.
    A checkout that the manager has on its default path (a .pth editable install) still goes onto
    RETURNN's sys.path; a site-packages install stops with an error naming the fix."""
    from i6_core.serialization import serialization_v2

    import i6_shard.returnn_config.pycode as pycode

    root = pycode.i6_shard_root()
    base = serialization_v2.get_base_sys_path_list()
    monkeypatch.setattr(serialization_v2, "get_base_sys_path_list", lambda: base + [root])
    if install == "site_packages":
        import site

        monkeypatch.setattr(pycode, "i6_shard_root", lambda: site.getsitepackages()[0])
    train = sharded_files_dataset(["a.hdf", "b.hdf"], sub_epoch_dataset=HDF, partition_epoch=1)
    rc = sharded_returnn_config(BASE_CONFIG, train, v2=flavour == "v2", black_formatting=False)
    before = rc._sis_hash()
    config_path = str(tmp_path / "returnn.config")
    rc.write(config_path)
    assert rc._sis_hash() == before

    out = run_without_i6_shard(["-c", load_config_code(config_path)], cwd=tmp_path)
    if install == "site_packages":
        assert out.returncode != 0 and "this RETURNN config needs i6_shard" in out.stderr, out.stderr[-3000:]
        return
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"SUB {dict(HDF, files=['x.hdf'])!r}" in out.stdout
    assert f"FROM {os.path.join(root, 'i6_shard', '__init__.py')}" in out.stdout


def test_classic_placement_shape():
    pytest.importorskip("i6_shard.returnn_ext.distrib_files", reason=RETURNN_REASON)
    train = sharded_files_dataset(["a", "b"], sub_epoch_dataset=HDF, partition_epoch=1, distribution="balanced")
    rc = ReturnnConfig(dict(BASE_CONFIG), python_prolog="import os")
    add_sharded_dataset(rc, train, key="train")
    entry = rc.config["train"]
    assert isinstance(entry["class"], CodeWrapper) and entry["class"].code == "_i6_shard_train_dataset_class"
    assert isinstance(entry["get_sub_epoch_dataset"], CodeWrapper)
    assert rc.python_prolog[0] == "import os" and isinstance(rc.python_prolog[1], SubEpochDatasetCode)
    code = rc.python_prolog[1].get()
    assert "_i6_shard_train_get_sub_epoch_dataset = _i6_shard_partial(" in code
    assert "from i6_shard.returnn_ext.distrib_files import ShardedDistributeFilesDataset" in code
    with pytest.raises(ValueError, match="must be an ASCII Python identifier"):
        add_sharded_dataset(rc, train, key="dev set")
    with pytest.raises(ValueError, match="already has 'train'"):
        add_sharded_dataset(rc, train)
    with pytest.raises(ValueError, match="hash_full_python_code=True"):
        add_sharded_dataset(ReturnnConfig({}, hash_full_python_code=True), train)


def _write_and_load(rc, path):
    from returnn.config import Config

    rc.write(str(path))
    config = Config()
    config.load_file(str(path))
    return config.typed_value("train")


@settings(max_examples=examples(15))
@given(names=st.lists(file_names, min_size=2, max_size=5), v2=st.booleans())
def test_returnn_config_write_round_trips_any_file_name(tmp_path_factory, names, v2):
    train = sharded_files_dataset(names, sub_epoch_dataset={**HDF, "note": names[0]}, partition_epoch=2)
    rc = sharded_returnn_config(BASE_CONFIG, train, v2=v2, black_formatting=False)
    loaded = _write_and_load(rc, tmp_path_factory.mktemp("cfg") / "returnn.config")
    assert loaded["files"] == names
    assert loaded["get_sub_epoch_dataset"](names[:1]) == {**HDF, "note": names[0], "files": names[:1]}


def test_training_job_kwargs():
    train = sharded_files_dataset([f"{i}" for i in range(8)], sub_epoch_dataset=HDF, partition_epoch=2)
    rc = sharded_returnn_config(BASE_CONFIG, train)
    kwargs = training_job_kwargs(rc, num_gpus=4, passes=3, time_rqmt=100, **EXE)
    assert kwargs["num_epochs"] == 6  # sharded: one pass is one full epoch of partition_epoch=2 sub-epochs
    assert kwargs["horovod_num_processes"] == 4 and kwargs["distributed_launch_cmd"] == "torchrun"
    assert kwargs["returnn_config"].config["torch_distributed"] == {} and "torch_distributed" not in rc.config
    assert kwargs["time_rqmt"] == 100
    single = training_job_kwargs(rc, num_gpus=1, num_epochs=3)
    assert "horovod_num_processes" not in single and "torch_distributed" not in single["returnn_config"].config
    with pytest.raises(ConfigCheckError, match="8 files cannot fill num_shards\\*partition_epoch=8\\*2=16 bins"):
        training_job_kwargs(rc, num_gpus=8, num_epochs=2)
    with pytest.raises(ConfigCheckError, match="predates"):
        training_job_kwargs(rc, num_gpus=2, num_epochs=2, returnn_version="1.20240101.000000")
    with pytest.raises(ConfigCheckError, match="sharding_fix=True is set, but RETURNN 1.20250101.000000 lacks"):
        training_job_kwargs(rc, num_gpus=2, num_epochs=2, returnn_version="1.20250101.000000")
    with pytest.raises(ValueError, match="set backend='torch'"):
        training_job_kwargs(sharded_returnn_config({"backend": "tensorflow"}, train), num_gpus=2, num_epochs=2)
    with pytest.raises(ValueError, match="give only one"):
        training_job_kwargs(
            sharded_returnn_config({**BASE_CONFIG, "torch_distributed": {"reduce_type": "param"}}, train),
            num_gpus=2,
            num_epochs=2,
            torch_distributed={},
        )
    with pytest.raises(ValueError, match="exactly one of num_epochs"):
        training_job_kwargs(rc, num_gpus=2)
    with pytest.raises(ValueError, match="horovod_num_processes is set by training_job_kwargs"):
        training_job_kwargs(rc, num_gpus=2, num_epochs=2, horovod_num_processes=2)
    # i6_core's torchrun starts num_gpus processes on every node: 4 ranks where 2 were planned
    with pytest.raises(ValueError, match=r"multi_node_slots=2: .* a world of num_gpus \* multi_node_slots ranks"):
        training_job_kwargs(rc, num_gpus=2, num_epochs=2, multi_node_slots=2)
    assert training_job_kwargs(rc, num_gpus=2, num_epochs=2, multi_node_slots=1)["horovod_num_processes"] == 2


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_epochs": 0}, ValueError, r"num_epochs=0 must be a positive int \(RETURNN's num_epochs"),
        ({"num_epochs": -5}, ValueError, r"num_epochs=-5 must be a positive int"),
        ({"num_epochs": "10"}, TypeError, r"num_epochs='10' has type str; .*; pass num_epochs=10$"),
        ({"num_epochs": 2.5}, TypeError, r"num_epochs=2\.5 has type float; .*give passes= instead"),
        ({"num_epochs": True}, TypeError, r"num_epochs=True has type bool"),
        ({"num_gpus": 0}, ValueError, r"num_gpus=0 must be a positive int"),
        ({"num_gpus": "2"}, TypeError, r"num_gpus='2' has type str; num_gpus must be a positive int"),
        ({"num_gpus": 2.0}, TypeError, r"num_gpus=2\.0 has type float"),
        (
            {"torch_distributed": "x"},
            TypeError,
            r"torch_distributed='x' has type str; torch_distributed must be a dict",
        ),
        ({"torch_distributed": ["param"]}, TypeError, r"torch_distributed=\['param'\] has type list"),
        (
            {"train_key": 1, "passes": 1, "num_epochs": None},
            TypeError,
            r"train_key=1 has type int; train_key must be a str",
        ),
    ],
)
def test_training_job_rejects_bad_arguments_naming_them(kwargs, error, match):
    train = sharded_files_dataset([f"{i}" for i in range(8)], sub_epoch_dataset=HDF, partition_epoch=2)
    rc = sharded_returnn_config(BASE_CONFIG, train)
    kwargs = {"num_gpus": 2, "num_epochs": 4, **kwargs}
    with pytest.raises(error, match=match):
        training_job_kwargs(rc, **kwargs, **EXE)
    with pytest.raises(error, match=match):
        training_job(rc, **kwargs, **EXE)


def test_config_placement_arguments_are_checked():
    train = sharded_files_dataset(["a", "b"], sub_epoch_dataset=HDF, partition_epoch=1)
    with pytest.raises(TypeError, match=r"dataset has type list; .*build it with sharded_files_dataset"):
        add_sharded_dataset(ReturnnConfig({}), [train])
    with pytest.raises(TypeError, match=r"config has type list; .*a dict of RETURNN config keys"):
        sharded_returnn_config([("backend", "torch")], train)
    with pytest.raises(TypeError, match=r"post_config='x' has type str; post_config must be a dict"):
        sharded_returnn_config({}, train, post_config="x")
    with pytest.raises(TypeError, match=r"v2='no' has type str; v2 must be True or False"):
        sharded_returnn_config({}, train, v2="no")
    rc = sharded_returnn_config(BASE_CONFIG, train)
    with pytest.raises(TypeError, match=r"returnn_version=1 has type int; give RETURNN's version string"):
        training_job_kwargs(rc, num_gpus=1, num_epochs=1, returnn_version=1)


def test_training_job_takes_numpy_integers_as_python_ints():
    import numpy as np

    train = sharded_files_dataset([f"{i}" for i in range(8)], sub_epoch_dataset=HDF, partition_epoch=2)
    kwargs = training_job_kwargs(
        sharded_returnn_config(BASE_CONFIG, train), num_gpus=np.int64(2), num_epochs=np.int32(4), **EXE
    )
    assert type(kwargs["num_epochs"]) is int and type(kwargs["horovod_num_processes"]) is int
    assert kwargs["num_epochs"] == 4 and kwargs["horovod_num_processes"] == 2


def test_plain_i6_core_job_shows_the_pitfall_the_helper_avoids():
    from i6_shard.returnn_config import check_returnn_config

    train = sharded_files_dataset([f"{i}" for i in range(8)], sub_epoch_dataset=HDF, partition_epoch=2)
    job = ReturnnTrainingJob(
        sharded_returnn_config(BASE_CONFIG, train),
        num_epochs=2,
        horovod_num_processes=2,
        distributed_launch_cmd="torchrun",
        **EXE,
    )
    merged = {**job.returnn_config.config, **job.returnn_config.post_config}
    assert merged["use_horovod"] is True
    with pytest.raises(ConfigCheckError, match="without torch_distributed"):
        check_returnn_config(merged, num_ranks=2)


@pytest.mark.parametrize("local", [True, False])
def test_readme_recipe_snippet_builds_the_jobs(tmp_path, local, monkeypatch):
    """The first code block of the README's "Config builders" section runs as it is (and with LOCAL = False):
    the training reads the plan and depends on the plan job; local: 2 CPU ranks with gloo that fit 2 cores. The
    RETURNN root is ``RETURNN_ROOT`` of the environment before the one of settings.py (which the tutorial's run,
    tests/training/test_tutorial.py, uses)."""
    pytest.importorskip("i6_shard.jobs", reason=SISYPHUS_REASON)
    import re

    monkeypatch.setenv("RETURNN_ROOT", str(tmp_path / "returnn_from_env"))
    monkeypatch.setattr(gs, "RETURNN_ROOT", str(tmp_path / "returnn_from_settings"), raising=False)

    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"), encoding="utf-8").read()
    section = readme[readme.index("## Config builders") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    assert "\nLOCAL = True" in snippet and snippet.startswith("# config/train.py")
    if not local:
        snippet = snippet.replace("\nLOCAL = True", "\nLOCAL = False")
    namespace = {"__name__": "readme_config"}
    exec(compile(snippet, "README.md", "exec"), namespace)
    jobs = []
    make_job = namespace["training_job"]
    namespace["training_job"] = lambda *args, **kwargs: jobs.append(make_job(*args, **kwargs)) or jobs[-1]
    namespace["py"]()
    (job,) = jobs
    assert isinstance(job, ReturnnTrainingJob) and job.horovod_num_processes == (2 if local else 8)
    assert job.returnn_root.get_path() == str(tmp_path / "returnn_from_env")
    train = job.returnn_config.config["train"]
    plan_jobs = [p.creator for p in job._sis_inputs if type(p.creator).__name__ == "ShardPlanJob"]
    assert len(plan_jobs) == 1 and train["plan"] == plan_jobs[0].out_plan and "file_sizes" not in train
    assert train["distribution"] == "equal_steps"
    assert job.returnn_config.config["torch_distributed"] == ({"backend": "gloo"} if local else {})
    if local:
        assert (job.rqmt["cpu"], job.rqmt["mem"], job.rqmt["gpu"]) == (2, 4, 0)
        assert job.returnn_config.post_config["device"] == "cpu"
    else:
        assert job.rqmt["gpu"] == 8
    # The plan job takes the training's num_epochs and holds the sub-epoch RETURNN preloads after the last one.
    assert plan_jobs[0].num_epochs == job.returnn_config.post_config["num_epochs"]
    assert plan_jobs[0].preload_next_n_sub_epochs is None  # RETURNN's default 1, planned by the job


def test_passes_follow_the_sharding_mode_the_reader_finds():
    """Under dataset_distribution="shard" the files are sharded although distrib_shard_files is off."""
    train = sharded_files_dataset(
        [f"{i}" for i in range(8)], sub_epoch_dataset=HDF, partition_epoch=2, distrib_shard_files=False
    )
    shard = sharded_returnn_config({**BASE_CONFIG, "torch_distributed": {"dataset_distribution": "shard"}}, train)
    assert training_job_kwargs(shard, num_gpus=4, passes=3, **EXE)["num_epochs"] == 6
    plain = sharded_returnn_config(BASE_CONFIG, train)
    with pytest.raises(ValueError, match="passes=3 needs num_epochs=3/2"):  # unsharded: 4 passes per full epoch
        training_job_kwargs(plain, num_gpus=4, passes=3, **EXE)


@pytest.mark.parametrize("v2", [True, False])
def test_callable_files_in_written_configs(tmp_path, v2):
    """A callable file list (with Sisyphus paths as arguments) is hashed by name and arguments and
    written as code that RETURNN calls when it runs."""
    import functools

    from .config_ranks import META_FILES_KEY, file_pairs, meta_template

    def pairs(feat):
        return functools.partial(file_pairs, feat_dir=tk.Path(feat), align_dir=tk.Path(str(tmp_path / "align")))

    train = sharded_files_dataset(
        pairs(str(tmp_path / "feat")), sub_epoch_dataset=meta_template(), files_key=META_FILES_KEY, partition_epoch=1
    )
    rc = sharded_returnn_config(BASE_CONFIG, train, v2=v2)
    other = sharded_returnn_config(BASE_CONFIG, dict(train, files=pairs(str(tmp_path / "other"))), v2=v2)
    same = sharded_returnn_config(BASE_CONFIG, dict(train, files=pairs(str(tmp_path / "feat"))), v2=v2)
    assert sis_hash_helper(rc) == sis_hash_helper(same) != sis_hash_helper(other)
    if v2:
        assert sis_hash_helper(rc.config["train"]) == sis_hash_helper(train)
    for d in ("feat", "align"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.hdf").write_bytes(b"")
    loaded = _write_and_load(rc, tmp_path / "returnn.config")
    assert callable(loaded["files"]) and not isinstance(loaded["files"], tk.Path)
    assert loaded["files"]() == [(str(tmp_path / "feat" / "x.hdf"), str(tmp_path / "align" / "x.hdf"))]
