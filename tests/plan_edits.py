"""Edits of a stored plan file, made as a user's script would make them (np.load, change, np.savez), for the
hostile-input tests and their rerun in benchmarks/rerun_hostile_cases.py."""

import numpy as np


def edit_npz(path_in, path_out, edit) -> str:
    """The archive at ``path_in`` with its members changed by ``edit`` (a dict of arrays in, one out), written
    uncompressed to ``path_out``; its path."""
    with np.load(path_in) as f:
        data = {k: f[k] for k in f.files}
    np.savez(path_out, **edit(data))
    return str(path_out)


def repeat_file(d):
    """The second file of the first bin of full epoch 0 is its first again: one repeats, one vanishes."""
    orders = d["orders"].copy()
    orders[0, 0, 1] = orders[0, 0, 0]
    return {**d, "orders": orders}


def vanish_file(d):
    """The last file of full epoch 0 is the one before it: that file repeats, the last vanishes."""
    orders = d["orders"].copy()
    orders[0, 0, -1] = orders[0, 0, -2]
    return {**d, "orders": orders}


def empty_bin(d):
    """The first bin of full epoch 0 is empty."""
    bounds = d["bounds"].copy()
    bounds[0, 0, 1] = bounds[0, 0, 0]
    return {**d, "bounds": bounds}


def long_distribution(d):
    """A distribution of 10 million characters."""
    return {**d, "distribution": np.array("x" * 10_000_000)}
