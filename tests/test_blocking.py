"""The test helpers that wait for a state, not for a clock: what keeps changing (a process that writes, or uses CPU)
is waited for however long it takes; what stands still is a hang, killed and failed. The stall is counted on a
simulated clock here, so no verdict depends on how fast the machine is."""

import os
import subprocess
import sys
import time

import pytest

from tests.blocking import _cpu_ticks, returns_within, run_to_end, unblock_fifo, wait_for_process, wait_for_state


class _Clock:
    """A clock that a pause advances: each pause of ``poll`` seconds takes ``step`` simulated seconds."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        return self.now

    def pause(self, _seconds):
        self.now += self.step


def test_a_changing_state_is_waited_for_far_past_the_stall_limit():
    clock, seen = _Clock(step=30.0), iter(range(1000))
    last = wait_for_state(
        lambda: next(seen), done=lambda n: n == 500, what="counting", stall=60.0, pause=clock.pause, clock=clock
    )
    assert last == 500 and clock.now == 500 * 30.0  # 250 times the stall limit, never a hang


def test_a_state_that_stands_still_is_a_hang_named_with_what_was_seen():
    clock = _Clock(step=30.0)
    with pytest.raises(pytest.fail.Exception, match="counting: nothing changed for 60 s .*last seen: 7"):
        wait_for_state(lambda: 7, done=lambda n: n == 8, what="counting", stall=60.0, pause=clock.pause, clock=clock)
    assert clock.now == 90.0  # the first look past 60 s without a change


def test_a_hung_process_is_killed_with_what_it_started():
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"], stdout=subprocess.DEVNULL, start_new_session=True
    )
    clock = _Clock(step=0.0)

    def ticking():  # each look is a simulated minute later
        clock.now += 60.0
        return clock.now

    with pytest.raises(pytest.fail.Exception, match="the sleeper: nothing changed for 30 s"):
        wait_for_process(proc, what="the sleeper", snapshot=lambda: None, stall=30.0, clock=ticking)
    assert proc.returncode is not None and proc.returncode < 0  # killed, not left running


def test_a_child_that_computes_without_writing_counts_as_working():
    before = _cpu_ticks(os.getpid())
    t = time.process_time()
    while time.process_time() - t < 0.3:  # CPU time, not wall time
        pass
    assert _cpu_ticks(os.getpid()) > before


def test_run_to_end_gives_what_subprocess_run_gives():
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    res = run_to_end([sys.executable, "-c", code])
    assert (res.returncode, res.stdout, res.stderr) == (3, "out\n", "err\n")


def _looks(step):
    """A clock that is ``step`` simulated seconds later at each look."""
    looks = iter(range(10**9))
    return lambda: next(looks) * step


def test_a_call_blocked_without_cpu_is_a_hang_and_is_unblocked(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    unblocked = []

    def unblock():
        unblocked.append(True)
        unblock_fifo(fifo)()

    with pytest.raises(pytest.fail.Exception, match="blocked.*nothing changed for 60 s"):
        returns_within(lambda: open(fifo).close(), stall=60.0, unblock=unblock, poll=0.05, clock=_looks(30.0))
    assert unblocked == [True]


def test_a_call_that_computes_is_waited_for_past_the_stall_limit():
    clock = _looks(5.0)

    def spin():
        t = time.thread_time()
        while time.thread_time() - t < 0.8:  # the thread's CPU time, not wall time
            pass
        return clock()

    assert returns_within(spin, stall=60.0, poll=0.05, clock=clock) > 60.0  # it computed all along
