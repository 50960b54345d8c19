"""bench/batch_host.py on the adapter present: every way of the batched execute loop is timed, with the
GPU calls and without, and wgpu-native's recording and finishing of a dispatch (no figure is compared
with another: the machine's load moves them; only that each is there and positive). The queue's
submissions are held back while the loops run, and the device still works after."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import batch_host


def test_every_way_of_the_batched_loop_is_timed(capsys):
    assert batch_host.main(["--launches", "200", "--rounds", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# adapter ") and "on a hit, in a batch" in lines[0]
    rows = {line.rsplit(None, 2)[0].strip(): line for line in lines[1:-1]}
    assert set(rows) == {"execute", "execute (no GPU calls)", "launch", "launch (no GPU calls)", "record",
                         "record (no GPU calls)", "commands"}, lines
    for line in rows.values():
        least, median = (float(cell) for cell in line.split()[-2:])
        assert 0 < least <= median, line
    native = [float(cell) for cell in re.findall(r"\d+\.\d\d", lines[-1])]
    assert lines[-1].startswith("wgpu-native, a dispatch in one pass: ") and len(native) == 2
    assert all(figure > 0 for figure in native), lines[-1]


def test_a_held_queue_drops_submissions_only_while_held():
    submitted = []

    class Queue:
        def submit(self, buffers):
            submitted.append(buffers)

        def read_buffer(self, buffer):
            return b"read"

    held = batch_host.HeldQueue(Queue())
    held.held = True
    held.submit(["a"])
    held.held = False
    held.submit(["b"])
    assert submitted == [["b"]] and held.read_buffer(None) == b"read"
