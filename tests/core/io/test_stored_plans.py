"""Plans outlive upgrades: plan files stored in tests/data/plans (formats 1 and 2, one per distribution)
still load with this i6_shard and give their stored bins. For "returnn" the bins are checked against
RETURNN's own DistributeFilesDataset; for the other distributions the stored file itself is the pin, made
once: if this i6_shard cuts them differently, the distribution changed and this test fails on purpose."""

import glob
import importlib.util
import os
import re

import numpy as np
import pytest

from i6_shard.core import PlanSettings, read_plan_file
from i6_shard.core.io.plan_file import read_plan_head
from i6_shard.core.io.plan_file import read_plan_layout
from i6_shard.core.pure.cut import CUTS

pytest.importorskip("returnn.datasets.distrib_files", reason="parity tests need returnn (test extra)")

from ...returnn_ranks import returnn_files  # noqa: E402

_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data", "plans")
_spec = importlib.util.spec_from_file_location("_make_plans", os.path.join(_DIR, "make_plans.py"))
_made = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_made)
_STORED = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(_DIR, "*.npz")))
#: The pinned plans of each distribution's current version (the others pin older versions' bins).
_CURRENT = [n for n in _STORED if n in {_made.stored_name(d) for d in CUTS} | {"format1_returnn_unsharded"}]
_CURRENT += [n for n in _STORED if n.startswith("format1_") and n not in _CURRENT and CUTS[n[8:]].version == 1]
_CURRENT.sort()


def _parsed(name: str):
    """(format, distribution, sharding mode, version) of a stored plan's name (``format2_equal_steps_v2``)."""
    fmt, rest = name.split("_", 1)
    version = 1
    if re.search(r"_v[0-9]+$", rest):
        rest, version = rest.rsplit("_v", 1)
    distribution = max((d for d in CUTS if rest == d or rest.startswith(d + "_")), key=len)  # flexible_auto
    return fmt, distribution, rest[len(distribution) + 1 :], int(version)


def _stored_bins(path: str):
    """[rank][epoch - 1] -> keys, from the stored arrays with numpy alone (as docs/file_formats.md describes)."""
    with np.load(path, allow_pickle=False) as d:
        keys = bytes(d["keys_utf8"]).decode("utf-8", "surrogatepass").split("\0")
        p, w, sharded = int(d["partition_epoch"]), int(d["num_shards"]), bool(d["distrib_shard_files"])
        num_epochs = int(d["num_epochs"])
        out = [[] for _ in range(w)]
        for epoch in range(1, num_epochs + 1):
            for r in range(w):
                order = d["orders"][(epoch - 1) // p, 0 if sharded else r]
                bnd = d["bounds"][(epoch - 1) // p, 0 if sharded else r]
                b = (r * p if sharded else 0) + (epoch - 1) % p
                out[r].append([keys[i] for i in order[bnd[b] : bnd[b + 1]].tolist()])
    return out


def test_every_distribution_and_both_formats_are_pinned():
    format1 = ("returnn", "balanced", "flexible", "returnn_unsharded")  # the distributions of that format's time
    assert {f"format1_{d}" for d in format1} <= set(_STORED)
    current = [f"format1_{d}" for d in format1 if d == "returnn_unsharded" or CUTS[d].version == 1]
    assert _CURRENT == sorted(current + [_made.stored_name(d) for d in CUTS])
    older = [_parsed(n) for n in _STORED if n not in _CURRENT]
    assert all(version < CUTS[d].version for _, d, _, version in older), older


@pytest.mark.parametrize("name", _STORED)
def test_stored_plan_loads_with_its_settings_and_versions(name):
    fmt, distribution, mode, version = _parsed(name)
    path = os.path.join(_DIR, name + ".npz")
    head = read_plan_head(path)
    expected = PlanSettings.from_mode(sharding=mode or "sharded", distribution=distribution, **_made.SETTINGS)
    assert head.plan.settings == expected
    assert head.plan.keys == _made.KEYS and head.plan.costs.tolist() == _made.SIZES
    assert head.format_version == int(fmt[-1])
    assert head.algorithm_version == (None if fmt == "format1" else version)
    loaded = read_plan_file(path)
    for k in range(head.num_full_epochs):
        for r in range(expected.num_layouts):
            order, bounds = read_plan_layout(path, full_epoch_0idx=k, layout_idx=r)
            assert order.tolist() == loaded.orders[k, r].tolist() and bounds.tolist() == loaded.bounds[k, r].tolist()


@pytest.mark.parametrize("name", [n for n in _STORED if "_returnn" in n])
def test_stored_returnn_plans_are_what_returnns_own_dataset_reads(name):
    path = os.path.join(_DIR, name + ".npz")
    settings = read_plan_head(path).plan.settings
    assert _stored_bins(path) == returnn_files(_made.KEYS, _made.SIZES, settings, num_epochs=settings.num_epochs)


@pytest.mark.parametrize("name", _CURRENT)
def test_this_i6_shard_still_cuts_the_stored_bins(name):
    """Fails when a distribution's output changes: then raise its ``CutSpec.version``, add pinned plans of the
    new version (``make_plans.stored_name``), and keep these (plans written before must still train their stored
    bins: the tests above load them)."""
    path = os.path.join(_DIR, name + ".npz")
    settings = read_plan_head(path).plan.settings
    plan = _made.plan_of(settings)
    now = [
        [plan.files_for(epoch=e, shard_index=r) for e in range(1, settings.num_epochs + 1)]
        for r in range(settings.num_shards)
    ]
    assert now == _stored_bins(path), (
        f"{settings.distribution!r} now cuts other bins than the stored plan {name}: raise "
        f"the version of its row in CUTS (now {CUTS[settings.distribution].version})"
    )


def test_a_loaded_plan_serves_its_stored_bins_without_cutting_again():
    """``load_plan`` gives the bins the file stores, which a training given the file reads: an "equal_steps" plan
    needs the sequence lengths to cut again, which the file does not hold, so readers of a training's logs
    (train-report, the verify report) compare with the stored bins."""
    from i6_shard.core import load_plan

    path = os.path.join(_DIR, "format2_equal_steps.npz")
    plan_file = read_plan_file(path)
    plan = load_plan(path)
    p = plan.partition_epoch
    for epoch in range(1, plan_file.orders.shape[0] * p + 1):
        order, bounds = plan_file.layout((epoch - 1) // p)
        for r in range(plan.num_shards):
            b = r * p + (epoch - 1) % p
            want = [plan.keys[i] for i in order[bounds[b] : bounds[b + 1]]]
            assert plan.files_for(epoch=epoch, shard_index=r) == want, (epoch, r)
    with pytest.raises(ValueError, match="no sequence lengths"):  # the plan as read cuts again, and cannot
        plan_file.plan.layout(full_epoch_0idx=0)
