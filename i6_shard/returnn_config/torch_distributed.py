"""The rule of a config's ``torch_distributed`` (what RETURNN refuses at start-up), defined once in
:mod:`i6_shard.core.pure.torch_distributed` (plan options take it too); re-exported here for the reader."""

from ..core.pure import DATASET_DISTRIBUTIONS, check_torch_distributed

__all__ = ["DATASET_DISTRIBUTIONS", "check_torch_distributed"]
