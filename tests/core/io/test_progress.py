"""Progress: lines with done/total and rate only once the interval has passed, never for quick work."""

import io
import re
import threading
import time

from i6_shard.core.io import Progress

LINE = re.compile(r"^stat: (\d+)/(\d+) files \((\d+\.\d)%\), ([\d,.e+-]+) files/s, elapsed \d+s, ETA (\d+|inf)s$")


def test_quick_work_prints_nothing():
    out = io.StringIO()
    p = Progress("stat", total=1000, interval=3600, stream=out)
    for _ in range(1000):
        p.add(1)
    p.close()
    assert out.getvalue() == ""


def test_slow_work_prints_done_total_and_rate_after_the_interval():
    out = io.StringIO()
    p = Progress("stat", total=10, interval=0.5, stream=out)
    p.add(1)
    assert out.getvalue() == ""  # not before the first interval has passed
    time.sleep(0.55)
    p.add(1)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    m = LINE.match(lines[0])
    assert m and m.group(1, 2, 3) == ("2", "10", "20.0")
    assert float(m.group(4).replace(",", "")) > 0
    p.add(3)  # within the interval of the last line: silent
    assert len(out.getvalue().splitlines()) == 1
    p.add(5)
    p.close()  # a final line, since lines were printed
    last = LINE.match(out.getvalue().splitlines()[-1])
    assert last and last.group(1, 3, 5) == ("10", "100.0", "0")


def test_counts_from_many_threads_add_up():
    out = io.StringIO()
    p = Progress("stat", total=8000, interval=1e-9, stream=out)
    threads = [threading.Thread(target=lambda: [p.add(1) for _ in range(1000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.close()
    assert p.done == 8000
    done = [int(LINE.match(line).group(1)) for line in out.getvalue().splitlines()]
    assert done == sorted(done) and done[-1] == 8000


def test_writes_to_stderr_by_default(capsys):
    p = Progress("stat", total=0, interval=0)
    p.add(0)
    p.close()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("stat: 0/0 files (100.0%)")


def test_slow_rates_keep_two_significant_digits():
    out = io.StringIO()
    p = Progress("stat", total=10, interval=0.2, stream=out)
    time.sleep(0.25)
    p.add(1)  # about 4 per second: "4" or "3.9", never "0"
    m = LINE.match(out.getvalue().splitlines()[0])
    assert m and 1 <= float(m.group(4)) < 10


def test_close_repeats_no_line_when_nothing_happened_since():
    out = io.StringIO()
    p = Progress("stat", total=2, interval=1e-9, stream=out)
    p.add(2)
    p.close()
    assert len(out.getvalue().splitlines()) == 1
