"""Running a call that may block (e.g. opening a FIFO) in a test without hanging the test run."""

import os
import threading

import pytest


def returns_within(fn, seconds=60.0, unblock=None):
    """fn()'s result, run in a thread: fails (instead of hanging) if it blocks, then ``unblock()`` frees it. A call
    that returns takes well under a second when idle: ``seconds`` is generous for a loaded machine."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if unblock:
            unblock()
        thread.join(5)
        pytest.fail(f"{fn} blocked for {seconds}s")
    if "error" in result:
        raise result["error"]
    return result["value"]


def unblock_fifo(path):
    """Open the FIFO for writing (and close it), which releases a reader blocked in open."""

    def unblock():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    return unblock
