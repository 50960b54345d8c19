"""bench/batch_host.py on the adapter present: every way of the batched execute loop is timed, with the
pass commands and without, and wgpu-native's recording and finishing of a dispatch and an empty pass
(no figure is compared with another: the machine's load moves them; only that each is there and
positive). The queue's submissions are held back while the loops run, and a loop that raises leaves
the device as it was."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import batch_host


def test_every_way_of_the_batched_loop_is_timed(capsys):
    assert batch_host.main(["--launches", "200", "--rounds", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# adapter ") and "on a hit, in a batch" in lines[0]
    rows = {line.rsplit(None, 2)[0].strip(): line for line in lines[1:-2]}
    assert set(rows) == {"execute", "execute (no pass commands)", "launch", "launch (no pass commands)", "record",
                         "record (no pass commands)", "commands"}, lines
    for line in rows.values():
        least, median = (float(cell) for cell in line.split()[-2:])
        assert 0 < least <= median, line
    for line, start in ((lines[-2], "wgpu-native, a dispatch in one pass: "),
                        (lines[-1], "wgpu-native, a pass with no command: ")):
        native = [float(cell) for cell in re.findall(r"\d+\.\d\d", line)]
        assert line.startswith(start) and len(native) == 2 and all(figure > 0 for figure in native), line
    whole, finish = (float(cell) for cell in re.findall(r"\d+\.\d\d", lines[-1]))
    assert finish <= whole, lines[-1]  # the finish is a part of the pass


def test_the_device_gets_its_commands_back_and_its_queue_unheld_when_a_loop_raises():
    class Device:
        _pass_commands = "real"
        depth = 0

        def begin_batch(self):
            self.depth += 1

        def end_batch(self):
            self.depth -= 1

    class Queue:
        def submit(self, buffers):
            raise AssertionError("nothing is submitted here")

    device, queue = Device(), batch_host.HeldQueue(Queue())

    def fails():
        assert device._pass_commands is batch_host.NO_COMMANDS or device._pass_commands == "real"
        assert queue.held
        raise RuntimeError("a loop failed")

    with pytest.raises(RuntimeError, match="a loop failed"):
        batch_host.timed_ways(device, queue, {"record": fails}, 10, 1)
    assert device._pass_commands == "real" and not queue.held and device.depth == 0


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
