"""The verification report users read: verdict, dropped share per sub-epoch, and the golden
report of a double-sharded training."""

from i6_shard.core.pure.reads import check_reads, summarize_reads
from i6_shard.core.reporting.verify import render_verify_report

from ...golden import check_golden
from ..pure.test_reads import _reads, _setup


def test_report_lists_verdict_and_dropped_share():
    plan, tags = _setup(4, 2, 1)
    reads = _reads(plan, tags, [1], keep=lambda seqs, r: seqs[:1] if r == 1 else seqs)
    violations = check_reads(reads, plan=plan, file_tags=tags)
    text = render_verify_report(
        summarize_reads(reads, plan=plan, file_tags=tags), violations, settings={"sharding_fix": True}
    )
    n0, n1 = len(reads[0].seq_tags), 1
    assert text.startswith("i6_shard sharding verification: FAILED\n")
    assert f"  sub-epoch 1: {n0} {n1}  dropped {100 * (1 - 2 * min(n0, n1) / (n0 + n1)):.1f}%" in text
    assert "  sharding_fix: True" in text and f"Violations: {len(violations)}" in text
    ok = render_verify_report(summarize_reads(_reads(plan, tags, [1]), plan=plan), [])
    assert ok.startswith("i6_shard sharding verification: OK\n") and "Violations: 0" in ok


def test_golden_report_of_double_sharding():
    """The report users read when RETURNN shards twice."""
    plan, tags = _setup(8, 2, 2, seed=4)
    reads = _reads(plan, tags, range(1, 5), keep=lambda seqs, r: seqs[r::2])
    violations = check_reads(reads, plan=plan, file_tags=tags)
    text = render_verify_report(
        summarize_reads(reads, plan=plan, file_tags=tags),
        violations,
        settings={"sharding_fix": False, "seq_ordering": "random"},
        max_listed=6,
    )
    check_golden("verify_report_double_sharding.txt", text)


def _instance_records(tmp_path, *, workers_shard):
    """Records of 2 ranks whose 2 DataLoader workers each read one shard of a 4-shard cut (or, without worker
    sharding, both the rank's shard of a 2-shard cut), as the verify runner writes them; and the reference."""
    from i6_shard import core

    files = []
    for i in range(8):
        path = tmp_path / f"f{i}.hdf"
        path.write_bytes(b"x" * (100 + 37 * i))
        files.append(str(path))
    cut = 4 if workers_shard else 2
    plan = core.ShardPlan(
        files, core.collect_file_sizes(files).sizes, core.PlanSettings(num_shards=cut, partition_epoch=2)
    )
    tags = {f: [f"{i}/{j}" for j in range(i % 3 + 1)] for i, f in enumerate(files)}
    settings = {"partition_epoch": 2, "seq_ordering": "random", "random_seed_offset": 0, "fixed_random_seed": None}
    settings["returnn_version"] = "1.20261022.211313"
    ranks = []
    for rank in range(2):
        sub_epochs = []
        for epoch in (1, 2):
            instances = []
            for worker in range(2):
                shard = rank * 2 + worker if workers_shard else rank
                keys = plan.files_for(epoch=epoch, shard_index=shard)
                instances.append(
                    {
                        "worker": worker,
                        "dataset_epoch": epoch,
                        "num_shards": cut,
                        "shard_index": shard,
                        "files": keys,
                        "seq_tags": [t for k in keys for t in tags[k]],
                    }
                )
            sub_epochs.append(
                {
                    "epoch": epoch,
                    "files": [k for i in instances for k in i["files"]],
                    "seq_tags": [t for i in instances for t in i["seq_tags"]],
                    "instances": instances,
                }
            )
        ranks.append(
            {"rank": rank, "settings": {**settings, "num_shards": 2, "shard_index": rank}, "sub_epochs": sub_epochs}
        )
    return ranks, {"files": files, "file_tags": [tags[f] for f in files]}


def test_dataloader_workers_are_checked_as_shards_of_their_cut_and_reported_per_rank(tmp_path):
    from i6_shard.core.reporting import verify_records

    ranks, reference = _instance_records(tmp_path, workers_shard=True)
    violations, report = verify_records(ranks, reference, num_shards=2)
    assert violations == [], report
    for se in ranks[0]["sub_epochs"]:
        per_rank = [sum(len(i["seq_tags"]) for i in r["sub_epochs"][se["epoch"] - 1]["instances"]) for r in ranks]
        assert f"  sub-epoch {se['epoch']}: {per_rank[0]} {per_rank[1]}  dropped" in report
    # the header gives the job's ranks, and how many shards their workers read
    assert "num_shards=2 " in report and "(each rank's 2 DataLoader workers read a shard each: 4 shards)" in report
    # and the RETURNN release the ranks read with, once (not again among the settings)
    assert "\nverified with RETURNN 1.20261022.211313 (returnn.__version__ as the ranks imported it)\n" in report
    assert report.count("1.20261022.211313") == 1


def test_the_header_gives_the_jobs_num_shards_where_the_reads_are_not_its_workers_shards():
    """Reads of a 4-shard cut the ranks' workers do not make up (2 ranks, 3 shards each would be 6): the header still
    says the job's 2 ranks, and that 4 shards were read."""
    plan, tags = _setup(8, 4, 1)
    reads = _reads(plan, tags, [1])
    text = render_verify_report(summarize_reads(reads, plan=plan, file_tags=tags), [], num_shards=2)
    header = text.splitlines()[2]
    assert header.startswith("num_shards=2  ") and header.endswith("  (the reading processes read 4 shards)")
    assert "verified with" not in text  # no release named: none given


def test_dataloader_workers_that_read_one_shard_twice_are_a_violation(tmp_path):
    from i6_shard.core.reporting import verify_records

    ranks, reference = _instance_records(tmp_path, workers_shard=False)
    violations, report = verify_records(ranks, reference, num_shards=2)
    assert [v.kind for v in violations].count("duplicate") == 4, report
    assert "several reading processes (DataLoader workers) read the same shard" in report
