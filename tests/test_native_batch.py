"""Launches in batches on the native device (wgpu-py; lavapipe without a GPU): a batch of launches
gives what the same launches give one by one, in order, in one submission; whatever reads or
tunes in the middle of a batch sees the launches before it."""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any

import pytest

from wgtune import Args, Config, Hit, Kernel, Key, TunableSet, Tuner, run_inline
from wgtune.backends.batch_recorder import LAUNCHES_PER_SUBMISSION
from wgtune.backends.native import NativeDevice
from wgtune.backends.webgpu import WebGPUDevice
from wgtune.backends.wgpu_shim import WgpuShim

N = 4096  # elements: small, so a launch is cheap on lavapipe
LAUNCHES = 40

PARAMS = """
struct Params { n: u32, a: f32, b: f32 }
@group(0) @binding(PARAMS_BINDING) var<uniform> p: Params;
"""
IN_PLACE = PARAMS.replace("PARAMS_BINDING", "1") + """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.n) { x[g.x] = BODY; } }
"""
AXPB = PARAMS.replace("PARAMS_BINDING", "2") + """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.n) { y[g.x] = p.a * x[g.x] + p.b; } }
"""


def tunable(name: str, source: str) -> TunableSet:
    """Two workgroup sizes of ``source``, so that a first call tunes."""
    candidates = [Kernel(f"{name}_wg{wg}", source.replace("WG", str(wg)),
                         grid=lambda args, wg=wg: (-(-args.params[0] // wg), 1, 1)) for wg in (64, 128)]
    return TunableSet(name, candidates, key=lambda args: {"n": args.params[0]})


def sets() -> dict[str, TunableSet]:
    return {"inc": tunable("inc", IN_PLACE.replace("BODY", "x[g.x] + 1.0")),
            "neg": tunable("neg", IN_PLACE.replace("BODY", "-x[g.x]")),
            "axpb": tunable("axpb", AXPB)}


class CountingQueue:
    """A queue that counts its submissions and passes everything on."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.submissions = 0

    def submit(self, command_buffers: list) -> None:
        self.submissions += 1
        self.queue.submit(command_buffers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    device = NativeDevice.open()
    device.shim.queue = CountingQueue(device.shim.queue)
    return device


def quiet_tuner(device: NativeDevice) -> Tuner:
    return Tuner(device, config=Config(log_level="disabled", cache=False, samples=3, warmups=1, min_sample=0.0))


def floats(data: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(data) // 4}f", data))


class Chain:
    """Two buffers and the launches of a chain where each launch reads what the one before wrote,
    so that only the right order gives the right values: per round, x += 1; y = 3 - x; y = -y;
    x = 1 - y (x -> 3 - x)."""

    def __init__(self, device: NativeDevice, tunables: dict[str, TunableSet]) -> None:
        self.device = device
        self.x = device.create_buffer(struct.pack(f"<{N}f", *range(N)))
        self.y = device.create_buffer(size=4 * N)
        x_only, y_only = Args((self.x,), (N, 0.0, 0.0)), Args((self.y,), (N, 0.0, 0.0))
        there, back = Args((self.x, self.y), (N, -1.0, 3.0)), Args((self.y, self.x), (N, -1.0, 1.0))
        self.launches = [(tunables["inc"], x_only), (tunables["axpb"], there), (tunables["neg"], y_only),
                         (tunables["axpb"], back)]

    def run(self, tuner: Tuner, count: int, start: int = 0) -> None:
        for i in range(start, start + count):
            tunables, args = self.launches[i % len(self.launches)]
            tuner.execute(tunables, args)

    def x_values(self) -> list[float]:
        return floats(self.device.read_buffer_sync(self.x))

    @staticmethod
    def expected(launches: int) -> list[float]:
        """x after ``launches`` launches (a whole number of rounds), computed here."""
        assert launches % 4 == 0
        return [float(i if (launches // 4) % 2 == 0 else 3 - i) for i in range(N)]


def test_a_batch_gives_what_the_same_launches_give_one_by_one_in_one_submission(device):
    tunables = sets()
    tuner = quiet_tuner(device)
    one_by_one, batched = Chain(device, tunables), Chain(device, tunables)
    one_by_one.run(tuner, LAUNCHES + 4)  # also tunes every set: each launch after is a hit
    queue = device.shim.queue
    before = queue.submissions
    with tuner.batch():
        batched.run(tuner, LAUNCHES + 4)
        assert queue.submissions == before, "nothing submitted while the batch records"
    assert queue.submissions == before + 1
    one_by_one_x = one_by_one.x_values()
    assert batched.x_values() == one_by_one_x == Chain.expected(LAUNCHES + 4)
    assert floats(device.read_buffer_sync(batched.y)) == floats(device.read_buffer_sync(one_by_one.y))


def test_a_long_batch_is_submitted_part_by_part_in_order(device):
    tuner = quiet_tuner(device)
    chain = Chain(device, sets())
    chain.run(tuner, 4)  # tunes
    launches = 2 * LAUNCHES_PER_SUBMISSION + 4
    queue = device.shim.queue
    before = queue.submissions
    with tuner.batch():
        chain.run(tuner, launches, start=4)
        assert queue.submissions == before + 2, "a submission each LAUNCHES_PER_SUBMISSION launches"
    assert queue.submissions == before + 3
    assert chain.x_values() == Chain.expected(4 + launches)


def test_a_miss_in_a_batch_tunes_on_what_the_batch_ran_before_it_and_keeps_the_order(device):
    tunables = sets()
    tuner = quiet_tuner(device)
    chain = Chain(device, tunables)
    with tuner.batch():
        chain.run(tuner, LAUNCHES)  # the first launch of each set misses and tunes, mid-batch
    for name in ("inc", "neg", "axpb"):
        assert isinstance(tuner.fastest(tunables[name], Key({"n": N})), Hit), name
    assert chain.x_values() == Chain.expected(LAUNCHES)


def test_a_read_in_a_batch_sees_the_launches_before_it_and_the_batch_goes_on(device):
    tuner = quiet_tuner(device)
    chain = Chain(device, sets())
    chain.run(tuner, 4)  # tunes; x -> 3 - x
    queue = device.shim.queue
    before = queue.submissions
    with tuner.batch():
        chain.run(tuner, 4, start=4)  # x -> x
        assert chain.x_values() == Chain.expected(8), "read_buffer_sync sees the batch's launches"
        chain.run(tuner, 4, start=8)  # x -> 3 - x
        assert floats(run_inline(device.read_buffer(chain.x))) == Chain.expected(12)
        chain.run(tuner, 4, start=12)
    assert chain.x_values() == Chain.expected(16)
    # The launches went in three submissions (before each read, and the rest at the end), and the
    # second read submitted its copy (the first reads through wgpu-py's queue, not counted here).
    assert queue.submissions - before == 3 + 1


def test_an_exception_in_a_batch_submits_the_launches_before_it(device):
    tuner = quiet_tuner(device)
    chain = Chain(device, sets())
    chain.run(tuner, 4)  # tunes; x -> 3 - x
    with pytest.raises(RuntimeError, match="the caller's own failure"), tuner.batch():
        chain.run(tuner, 4, start=4)  # x -> x
        raise RuntimeError("the caller's own failure")
    assert chain.x_values() == Chain.expected(8)
    chain.run(tuner, 4, start=8)  # no batch open: submitted at once
    assert chain.x_values() == Chain.expected(12)


def counting_device(gpu: Any) -> tuple[WebGPUDevice, Counter]:
    """A WebGPU device on ``gpu`` whose pass commands are counted."""
    shim = WgpuShim(gpu)
    counts: Counter = Counter()
    for name in ("set_pipeline", "set_bind_group", "dispatch_workgroups"):
        command = getattr(shim, name)
        setattr(shim, name, lambda *args, command=command, name=name: (counts.update([name]), command(*args))[1])
    return WebGPUDevice(shim, timestamps=False), counts


def test_a_batch_sets_the_pipeline_and_bind_groups_only_where_they_change(device):
    gpu, counts = counting_device(device.gpu)
    axpb = run_inline(gpu.compile(sets()["axpb"].candidates[0]))
    x = gpu.create_buffer(struct.pack(f"<{N}f", *([1.0] * N)))
    y = gpu.create_buffer(size=4 * N)
    there, back = Args((x, y), (N, 2.0, 1.0)), Args((y, x), (N, 0.5, 0.0))  # x -> x + 0.5 a round
    grid = (N // 64, 1, 1)
    gpu.begin_batch()
    for _ in range(10):
        gpu.dispatch(axpb, there, grid)
        gpu.dispatch(axpb, back, grid)
    gpu.end_batch()
    assert counts == {"set_pipeline": 1, "set_bind_group": 20, "dispatch_workgroups": 20}
    counts.clear()
    gpu.begin_batch()
    for _ in range(10):
        gpu.dispatch(axpb, there, grid)  # the same call again: y = 2x + 1 each time
    gpu.end_batch()
    assert counts == {"set_pipeline": 1, "set_bind_group": 1, "dispatch_workgroups": 10}
    assert floats(run_inline(gpu.read_buffer(x)))[:3] == [6.0] * 3
    assert floats(run_inline(gpu.read_buffer(y)))[:3] == [13.0] * 3
