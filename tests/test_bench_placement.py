"""bench/placement.py on the adapter present: a set of copies replaces only the buffers asked
for, and a small run prints each key's table, the tunes' picks and the share within 2%."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import placement

from wgtune import Args, run_inline
from wgtune.backends.native import NativeDevice


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def test_a_set_of_copies_replaces_the_buffers_asked_for_and_keeps_their_contents(device):
    buffers = [device.create_buffer(bytes([slot]) * 16) for slot in range(3)]
    args = Args(buffers, (4,))
    copied = placement.copies_of(device, args, {2})
    assert list(copied.buffers[:2]) == buffers[:2] and copied.buffers[2] is not buffers[2]
    assert run_inline(device.read_buffer(copied.buffers[2]))[:16] == bytes([2]) * 16
    assert copied.params == args.params


def test_a_small_run_prints_the_sets_the_picks_and_the_share_within_two_percent(tmp_path):
    out = tmp_path / "placement.txt"
    assert placement.main(["--key", "24x16x40", "--copy", "out", "--copies", "1", "--tunes", "1", "--rounds", "1",
                           "--top", "2", "--out", str(out)]) == 0
    text = out.read_text()
    assert "matmul 24x16x40:" in text and "1 sets of copies (out)" in text
    assert "each set's winner: 0: " in text and "the tunes' picks by the mean over the sets: " in text
    assert "the tunes' picks within 2% of the best on the call's buffers: " in text
