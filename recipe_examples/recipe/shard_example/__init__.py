"""Recipe code of the i6_shard example: a job that writes tiny HDF training data."""

from .data import TinyHdfDataJob

__all__ = ["TinyHdfDataJob"]
