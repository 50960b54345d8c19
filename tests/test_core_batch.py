"""Launches in batches (``wgtune.Batch``, ``Tuner.batch``) on the fake device, which records a
batch's launches and runs their kernels only when the batch is submitted, as a GPU would."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, add_one_in_place, call, double_into, f32, floats, make_set, make_tuner

import wgtune
from wgtune import Hit, KernelError, WgtuneError

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def double_in_place(buffers: list[bytearray], params: tuple) -> None:
    """buffer 0 *= 2, in place."""
    buffers[0][:] = f32(2 * x for x in floats(buffers[0]))


def chain_sets(device: FakeDevice) -> tuple[wgtune.TunableSet, wgtune.TunableSet]:
    """Two one-candidate sets whose launches do not commute: +1 and *2, in place."""
    device.script("inc", kernel=add_one_in_place)
    device.script("dbl", kernel=double_in_place)
    return make_set("inc", name="inc"), make_set("dbl", name="dbl")


def chained(start: float, launches: int) -> float:
    """What ``launches`` alternating +1, *2 make of ``start``, in that order."""
    value = start
    for i in range(launches):
        value = value + 1 if i % 2 == 0 else value * 2
    return value


def test_n_launches_in_a_batch_are_one_submission_and_give_what_n_separate_launches_give():
    device = FakeDevice()
    tuner = make_tuner(device)
    inc, dbl = chain_sets(device)
    separate, batched = call(device, [1.0, 2.0]), call(device, [1.0, 2.0])
    for i in range(10):
        tuner.execute(inc if i % 2 == 0 else dbl, separate)
    before = device.submissions

    with tuner.batch():
        for i in range(10):
            tuner.execute(inc if i % 2 == 0 else dbl, batched)
        assert floats(batched.buffers[0]) == [1.0, 2.0], "recorded, not run, until the batch is submitted"
    assert device.submissions - before == 1
    assert floats(batched.buffers[0]) == floats(separate.buffers[0]) == [chained(1.0, 10), chained(2.0, 10)]


def test_the_explicit_form_submits_once_and_a_second_submit_is_an_error():
    device = FakeDevice()
    tuner = make_tuner(device)
    inc, _ = chain_sets(device)
    args = call(device, [0.0])
    tuner.execute(inc, args)
    before = device.submissions
    batch = tuner.batch()
    for _ in range(5):
        tuner.execute(inc, args)
    assert batch.open and device.submissions == before
    batch.submit()
    assert not batch.open and device.submissions == before + 1 and floats(args.buffers[0]) == [6.0]
    with pytest.raises(WgtuneError, match="submitted already"):
        batch.submit()
    tuner.execute(inc, args)  # no batch open now: submitted at once
    assert device.submissions == before + 2 and floats(args.buffers[0]) == [7.0]


def test_a_batch_inside_a_batch_joins_it_and_only_the_outer_one_submits():
    device = FakeDevice()
    tuner = make_tuner(device)
    inc, dbl = chain_sets(device)
    args = call(device, [1.0])
    tuner.execute(inc, args)
    tuner.execute(dbl, args)  # (1 + 1) * 2 = 4
    before = device.submissions
    with tuner.batch():
        tuner.execute(inc, args)
        with tuner.batch():
            tuner.execute(dbl, args)
        assert device.submissions == before and device.recorded, "the inner batch left its launches to the outer"
        tuner.execute(inc, args)
    assert device.submissions == before + 1
    assert floats(args.buffers[0]) == [(4.0 + 1) * 2 + 1]


def test_an_exception_in_a_batch_submits_the_launches_before_it_and_closes_the_batch():
    device = FakeDevice()
    tuner = make_tuner(device)
    inc, _ = chain_sets(device)
    args = call(device, [0.0])
    tuner.execute(inc, args)
    before = device.submissions
    with pytest.raises(ZeroDivisionError), tuner.batch() as batch:
        tuner.execute(inc, args)
        tuner.execute(inc, args)
        1 / 0  # noqa: B018 (the caller's code failing mid-batch)
    assert not batch.open and device.batch_depth == 0
    assert device.submissions == before + 1 and floats(args.buffers[0]) == [3.0]


def test_a_miss_in_a_batch_tunes_after_the_launches_before_it_ran_and_the_order_holds():
    device = FakeDevice()
    for name, seconds in (("slow", 2e-3), ("fast", 1e-3)):
        device.script(name, duration=seconds, kernel=double_into)
    seen_by_the_tune = []
    device.on_profile = lambda name, repeats: seen_by_the_tune.append(len(device.recorded))
    tuner = make_tuner(device)
    inc, _ = chain_sets(device)
    doubling = make_set("slow", "fast", name="doubling")
    x, y = device.buffer([1.0, 2.0]), device.buffer([0.0, 0.0])
    at_x = wgtune.Args((x,), (2,))
    tuner.execute(inc, at_x)  # x = [2, 3]

    with tuner.batch():
        tuner.execute(inc, at_x)  # x = [3, 4], recorded
        ran = tuner.execute(doubling, wgtune.Args((x, y), (2,)))  # a miss: tuned here, then recorded
        tuner.execute(inc, at_x)  # x = [4, 5], after the doubling
    assert ran.name == "fast" and isinstance(tuner.fastest(doubling, wgtune.Key({"n": 2})), Hit)
    assert seen_by_the_tune and set(seen_by_the_tune) == {0}, "the tune ran with nothing left unsubmitted"
    assert floats(y) == [6.0, 8.0] and floats(x) == [4.0, 5.0]


def test_a_device_that_cannot_batch_submits_each_launch_and_gives_the_same_outputs():
    class Unbatched(FakeDevice):
        """A third party's device: the Device defaults for batches, nothing of its own."""

        begin_batch = wgtune.Device.begin_batch
        end_batch = wgtune.Device.end_batch
        flush = wgtune.Device.flush

    device = Unbatched()
    tuner = make_tuner(device)
    inc, dbl = chain_sets(device)
    args = call(device, [1.0])
    before = device.submissions
    with tuner.batch():
        for i in range(6):
            tuner.execute(inc if i % 2 == 0 else dbl, args)
    assert device.submissions - before == 6 and floats(args.buffers[0]) == [chained(1.0, 6)]


def test_a_launch_the_gpu_refuses_in_a_batch_raises_at_the_submit_and_closes_the_batch():
    device = FakeDevice()
    tuner = make_tuner(device)
    inc, _ = chain_sets(device)
    broken = make_set("broken", name="broken")
    args = call(device, [0.0])
    tuner.execute(inc, args)
    tuner.execute(broken, args)  # known now (the only candidate): the next call of it is a hit
    device.script("broken", launch_error="refused by the driver")
    with pytest.raises(KernelError, match="refused by the driver"), tuner.batch():
        tuner.execute(inc, args)
        tuner.execute(broken, args)
    assert device.batch_depth == 0 and device.recorded == []
    tuner.execute(inc, args)  # unbatched again
    assert floats(args.buffers[0]) == [3.0]
