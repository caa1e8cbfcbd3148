"""The verification report users read: verdict, dropped share per sub-epoch, and the golden
report of a double-sharded training."""

from i6_shard.core.pure.reads import check_reads, summarize_reads
from i6_shard.core.reporting import render_verify_report

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
