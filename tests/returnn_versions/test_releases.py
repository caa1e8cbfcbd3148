"""The matrix of RETURNN releases since DistributeFilesDataset's distrib_shard_files: per release, in one subprocess
with that release first on the path (``release_checks``), the real RETURNN loads i6_shard's class with ``plan=`` on
3 ranks and reads every sequence exactly once per full epoch, each rank's files those of ``python -m i6_shard files``;
the builder's dicts for that release are constructed by its own DistributeFilesDataset; the cut and the sequence
order equal the release's on fuzzed inputs; the seed offsets and the DataLoader workers (reading by default, the
behavior version there, sharding again) are those the config reader says for that release. A subprocess per release
that imports it and runs 3 ranks: slow (in the quick tier, test_plan_release.py compares a plan with the oldest
release's own cut)."""

import os

import pytest

from i6_shard.core.pure.returnn_features import returnn_version_key

from ..deps import TORCH_INSTALL
from ..hdf_data import file_index
from .releases import CACHE, NEWEST, OLD_RELEASES, run_release_checks

pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")

_RELEASES = [pytest.param(v, marks=pytest.mark.slow, id=v) for v in (NEWEST,) + OLD_RELEASES]


def _check_reads(result, version: str) -> None:
    reads = result["ranks"]["reads"]
    for read in reads:
        where = f"RETURNN {version}, rank {read['rank']}, sub-epoch {read['epoch']}"
        assert read["files"] == read["planned"], f"{where}: the rank's files are not the plan's"
        assert read["given"] == read["files"], f"{where}: the sub-epoch dataset got other files than the bins"
        assert read["sub_epoch_shards"] in (None, 1), f"{where}: the sub-epoch dataset shards again"
        names = {os.path.basename(f) for f in read["files"]}
        assert {f"file{file_index(t):03d}.hdf" for t in read["tags"]} <= names, f"{where}: a tag of another file"
    assert result["ranks"]["unpickled"] == [[r, 3] for r in range(3)], "a pickled copy (DataLoader worker) differs"
    assert {(r["rank"], r["epoch"]) for r in reads} == {(r, e) for r in range(3) for e in (1, 2)}
    tags = [t for read in reads for t in read["tags"]]
    assert sorted(tags) == sorted(result["all_tags"]), (
        f"RETURNN {version}: one full epoch over 3 ranks read {len(tags)} sequences ({len(set(tags))} distinct), "
        f"the files hold {len(result['all_tags'])}"
    )


def _check_builder(result, version: str) -> None:
    has = result["features"]["detected"]
    builder = dict(result["builder"])
    # without the version, RETURNN's own class takes the dict only where it has sharding_fix; i6_shard's everywhere,
    # and it keeps the sub-epoch dataset from sharding again where Dataset has _num_shards
    unknown = builder.pop("plain_version_unknown")
    assert unknown.startswith("ok" if has["sharding_fix"] else "FAILED: TypeError"), unknown
    assert builder.pop("plan_version_unknown") == ("ok 1" if has["dataset_shards"] else "ok")
    failed = {k: v for k, v in builder.items() if v.startswith("FAILED")}
    assert not failed, f"RETURNN {version} rejects what the builder wrote for it: {failed}"
    lacks = {"plain_no_worker_proc": "use_worker_proc", "list_file": "files_list_file", "callable": "files_callable"}
    for variant, feature in lacks.items():
        assert builder[variant].startswith("refused") == (not has[feature]), (variant, builder[variant])
    for variant in set(builder) - set(lacks):
        assert builder[variant] == "ok", (variant, builder[variant])
    assert ("sharding_fix" in result["ranks"]["dict"]) == has["sharding_fix"]


@pytest.mark.parametrize("version", _RELEASES)
def test_release(version, tmp_path):
    result = run_release_checks(version, str(tmp_path))
    assert returnn_version_key(result["returnn_version"]) == returnn_version_key(version)
    assert result["returnn_file"].startswith(CACHE), result["returnn_file"]
    assert result["features"]["table_disagrees"] == {}, "the feature table names other first releases"
    _check_reads(result, version)
    _check_builder(result, version)
    assert result["cut"]["mismatches"] == [], "i6_shard's cut for this release differs from its own"
    if not result["features"]["detected"]["reaveraged_cut"]:  # the release's own variant was what passed
        assert result["cut"]["newest_differs"] > 0
    assert result["seq_order_mismatches"] == []
    assert result["seed_mismatches"] == [], f"RETURNN {version} seeds otherwise than the reader says it does"
    if result["loader"] is None:  # everything else passed
        pytest.skip(f"the DataLoader checks of RETURNN {version} need torch: {TORCH_INSTALL}")
    loader = {k: v for k, v in result["loader"].items() if v[0] != v[1]}
    assert loader == {}, f"RETURNN {version}'s DataLoader ([its, the reader's]) differs from the reader's"
