"""The cuts the recorded trainings of tests/data/returnn_logs ran: "balanced" of version 1, before the ranks of each
sub-epoch were drawn (i6_shard/core/pure/cut.py ``_draw_ranks``); their logs name the files of that version's bins."""

import dataclasses

from i6_shard.core.pure import cut as cut_module
from i6_shard.core.pure.balanced import distribute_balanced


def use_recorded_cuts(monkeypatch) -> None:
    """Plan as the recorded trainings did: "balanced" cuts as its version 1 did."""
    spec = cut_module.CUTS["balanced"]
    monkeypatch.setitem(cut_module.CUTS, "balanced", dataclasses.replace(spec, cut=distribute_balanced, version=1))
