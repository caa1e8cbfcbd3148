"""The test helpers that wait for a state, not for a clock: a process that works (writes, or uses CPU) is waited for
however long it takes; one that stands still is a hang, killed and failed."""

import sys
import time

import pytest

from tests.blocking import run_to_end


@pytest.mark.slow  # about 6 s of waiting
def test_a_process_that_writes_or_computes_is_waited_for_past_the_stall_limit():
    writes = "import sys, time\nfor i in range(6):\n    print(i, flush=True); time.sleep(0.5)\nsys.exit(3)"
    res = run_to_end([sys.executable, "-c", writes], stall=2.5)
    assert (res.returncode, res.stdout.split()) == (3, ["0", "1", "2", "3", "4", "5"])
    computes = "import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 2.5: pass\nprint('done')"
    res = run_to_end([sys.executable, "-c", computes], stall=2.5)
    assert res.stdout == "done\n" and res.returncode == 0


def test_a_process_that_stands_still_is_a_hang():
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match="nothing changed for 1 s"):
        run_to_end([sys.executable, "-c", "import time; print('x', flush=True); time.sleep(600)"], stall=1.0)
    assert time.monotonic() - start < 300  # killed, not waited out
