"""End to end with the real RETURNN: build the dataset dict for small HDF files, write a config
per rank, load it with RETURNN's config loader and iterate two full epochs on every rank."""

import collections
import textwrap

import pytest

from i6_shard.core import PlanSettings, ShardPlan, collect_file_sizes, save_file_sizes
from i6_shard.returnn_config import sharded_files_dataset
from i6_shard.returnn_config.pycode import write_returnn_config

from .fresh_python import load_config_code, run_without_i6_shard
from ..hdf_data import file_index, iterate_tags, write_tiny_hdf_files
from tests.deps import RETURNN_REASON

NUM_SHARDS, PARTITION_EPOCH, NUM_FILES = 2, 2, 11
HDF = {"class": "HDFDataset", "seq_ordering": "random"}
NAMES = [f"part{i:02d}.hdf" for i in range(NUM_FILES)]
NAMES[3] = 'it\'s a "file" ü\\x.hdf'
NAMES[7] = "new\nline.hdf"


def _tags_of_files(files):
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    with global_config_ctx(Config()):
        return {
            i: set(iterate_tags(init_dataset({"class": "HDFDataset", "files": [f]}), 1)) for i, f in enumerate(files)
        }


def _run_ranks(config_paths, num_epochs):
    """{(epoch, rank): tags} from loading each rank's config file with RETURNN's Config."""
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    seen = {}
    for rank, path in enumerate(config_paths):
        config = Config()
        config.load_file(path)
        assert config.typed_value("__debug_dummy_distributed_rank_and_size") == (rank, NUM_SHARDS)
        with global_config_ctx(config):
            dataset = init_dataset(config.typed_value("train"))
            assert (dataset._shard_index, dataset._num_shards) == (rank, NUM_SHARDS)
            for epoch in range(1, num_epochs + 1):
                seen[(epoch, rank)] = iterate_tags(dataset, epoch)
            dataset.finish_epoch(free_resources=True)
    return seen


@pytest.mark.parametrize("distribution", ["returnn", "balanced"])
def test_two_full_epochs_every_seq_once_and_files_as_planned(tmp_path, distribution):
    files = write_tiny_hdf_files(str(tmp_path / "data"), num_files=NUM_FILES, names=NAMES, seed=3)
    sizes = collect_file_sizes(files)
    file_sizes = None
    if distribution == "balanced":
        pytest.importorskip("i6_shard.returnn_ext.distrib_files", reason=RETURNN_REASON)
        file_sizes = str(tmp_path / "sizes.npz")
        save_file_sizes(sizes, file_sizes)
    train = sharded_files_dataset(
        files,
        sub_epoch_dataset=HDF,
        partition_epoch=PARTITION_EPOCH,
        num_shards=NUM_SHARDS,
        use_worker_proc=False,
        distribution=distribution,
        file_sizes=file_sizes,
    )
    paths = []
    for rank in range(NUM_SHARDS):
        paths.append(str(tmp_path / f"rank{rank}.config"))
        write_returnn_config(paths[-1], {"train": train, "__debug_dummy_distributed_rank_and_size": (rank, NUM_SHARDS)})

    num_epochs = 2 * PARTITION_EPOCH
    seen = _run_ranks(paths, num_epochs)
    file_tags = _tags_of_files(files)
    all_tags = collections.Counter(t for tags in file_tags.values() for t in tags)
    assert len(all_tags) > 2 * NUM_FILES and set(all_tags.values()) == {1}  # tags are unique

    for full_epoch in range(2):
        epochs = range(full_epoch * PARTITION_EPOCH + 1, (full_epoch + 1) * PARTITION_EPOCH + 1)
        counts = collections.Counter(t for e in epochs for r in range(NUM_SHARDS) for t in seen[(e, r)])
        assert counts == all_tags, f"full epoch {full_epoch}: not every sequence exactly once"

    plan = ShardPlan(
        sizes.keys,
        sizes.sizes,
        PlanSettings(num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, distribution=distribution),
    )
    index_of = {f: i for i, f in enumerate(files)}
    layouts = set()
    for (epoch, rank), tags in seen.items():
        read = {file_index(t) for t in tags}
        planned = {index_of[f] for f in plan.files_for(epoch=epoch, shard_index=rank)}
        assert read == planned, (epoch, rank)
        layouts.add((epoch > PARTITION_EPOCH, rank, frozenset(read)))
    # The second full epoch reshuffles: some rank reads a different set of files.
    first = {(r, fs) for late, r, fs in layouts if not late}
    second = {(r, fs) for late, r, fs in layouts if late}
    assert first != second


@pytest.mark.slow
def test_fresh_returnn_process_imports_i6_shard_from_the_config(tmp_path):
    """A RETURNN process that has not got i6_shard installed loads the config (which puts
    i6_shard on sys.path) and reads a sub-epoch in DFD's default worker process."""
    files = write_tiny_hdf_files(str(tmp_path / "data"), num_files=4, names=NAMES[:4], seed=1)
    train = sharded_files_dataset(files, sub_epoch_dataset=HDF, partition_epoch=2)  # default: worker process
    config_path = str(tmp_path / "returnn.config")
    write_returnn_config(config_path, {"train": train, "__debug_dummy_distributed_rank_and_size": (1, 2)})
    script = textwrap.dedent(f"""\
        from returnn.config import Config, global_config_ctx
        from returnn.datasets.basic import init_dataset
        if __name__ == "__main__":
            config = Config()
            config.load_file({config_path!r})
            with global_config_ctx(config):
                dataset = init_dataset(config.typed_value("train"))
                dataset.init_seq_order(epoch=1)
                n = 0
                while dataset.is_less_than_num_seqs(n):
                    dataset.load_seqs(n, n + 1)
                    print("TAG", dataset.get_tag(n))
                    n += 1
                dataset.finish_epoch(free_resources=True)
            import i6_shard
            print("FROM", i6_shard.__file__)
        """)
    (tmp_path / "run.py").write_text(script)
    out = run_without_i6_shard(["run.py"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    tags = [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("TAG ")]
    sizes = collect_file_sizes(files)
    plan = ShardPlan(sizes.keys, sizes.sizes, PlanSettings(num_shards=2, partition_epoch=2))
    index_of = {f: i for i, f in enumerate(files)}
    planned = {index_of[f] for f in plan.files_for(epoch=1, shard_index=1)}
    assert tags and {file_index(t) for t in tags} == planned


def test_config_written_with_i6_shard_in_site_packages_names_the_fix(tmp_path, monkeypatch):
    """i6_shard installed into the manager's site-packages (``pip install``): that directory must not
    go onto RETURNN's sys.path, so a RETURNN Python without i6_shard stops with an error naming the fix."""
    import site

    import i6_shard.returnn_config.pycode as pycode

    site_packages = site.getsitepackages()[0]
    monkeypatch.setattr(pycode, "i6_shard_root", lambda: site_packages)
    train = sharded_files_dataset(["a.hdf"], sub_epoch_dataset=HDF, partition_epoch=1)
    config_path = str(tmp_path / "returnn.config")
    write_returnn_config(config_path, {"train": train})
    text = open(config_path).read()
    assert f"sys.path.insert(0, {site_packages!r})" not in text and site_packages in text

    out = run_without_i6_shard(["-c", load_config_code(config_path)], cwd=tmp_path)
    assert out.returncode != 0
    assert "this RETURNN config needs i6_shard" in out.stderr and f"site-packages ({site_packages})" in out.stderr
    assert "pip install" in out.stderr and "symlink" in out.stderr and "recipe/" in out.stderr
    # Where i6_shard is installed (here: this process), the config loads.
    from returnn.config import Config

    config = Config()
    config.load_file(config_path)
    assert config.typed_value("train")["get_sub_epoch_dataset"](["x"])["files"] == ["x"]


def test_multi_modality_via_json_file_list_in_a_meta_dataset(tmp_path):
    """RETURNN's docstring example: (alignment, features) pairs split into a MetaDataset, from a .json list."""
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    from i6_shard.core import write_file_list

    align = write_tiny_hdf_files(str(tmp_path / "align"), num_files=4, seed=7)
    feat = write_tiny_hdf_files(str(tmp_path / "feat"), num_files=4, seed=7)  # same seed: same tags and lengths
    list_file = str(tmp_path / "files.json")
    write_file_list(list(zip(align, feat)), list_file)
    train = sharded_files_dataset(
        list_file,
        sub_epoch_dataset={
            "class": "MetaDataset",
            "data_map": {"classes": ("alignments", "data"), "data": ("features", "data")},
            "datasets": {
                "alignments": {"class": "HDFDataset", "seq_ordering": "random"},
                "features": {"class": "HDFDataset"},
            },
            "seq_order_control_dataset": "alignments",
        },
        files_key={0: ("datasets", "alignments", "files"), 1: ("datasets", "features", "files")},
        partition_epoch=2,
        use_worker_proc=False,
    )
    path = str(tmp_path / "returnn.config")
    write_returnn_config(path, {"train": train})
    config = Config()
    config.load_file(path)
    with global_config_ctx(config):
        dataset = init_dataset(config.typed_value("train"))
        assert sorted(dataset.get_data_keys()) == ["classes", "data"]
        tags = iterate_tags(dataset, 1) + iterate_tags(dataset, 2)
    expected = set().union(*_tags_of_files(align).values())
    assert sorted(tags) == sorted(expected)
