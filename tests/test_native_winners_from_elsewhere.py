"""Winners that were not tuned on this device (a bundle's, a collector's, an import's), on the
adapter present: one that does not fit the call is not used, one that is wrong is refused when it
is checked, one that is right serves with no tune and is kept as checked. Outputs start as NaN, so
an element left unwritten shows."""

from __future__ import annotations

import numpy as np
import pytest

from wgtune import Args, Config, Kernel, Mismatch, StoredEntry, TunableSet, Tuner, TuneStarted
from wgtune.backends.native import NativeDevice
from wgtune.kernels.bandwidth import fma_set
from wgtune.store.format import MemoryStore

N_ODD = 1001  # 4 does not divide it: a vec4 kernel without a tail cannot reach the last element


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def tuner_on(device: NativeDevice, events: list | None = None) -> Tuner:
    observer = events.append if events is not None else None
    return Tuner(device, store=MemoryStore(), observer=observer,
                 config=Config(log_level="disabled", samples=2, warmups=1, min_sample=0.0))


def seeded(tuner: Tuner, tunables: TunableSet, args: Args, winner: str) -> None:
    """A bundle's (or a collector's) winner for the call's key, claiming to be checked elsewhere."""
    key = tunables.key(args)
    tuner.cache.seed([StoredEntry(tunables.name, key, tunables.checksum, tunables.index_of[winner], winner,
                                  checked=True)])


def fma_call(device: NativeDevice, n: int) -> tuple[Args, np.ndarray]:
    rng = np.random.default_rng(n)
    x, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = device.create_buffer(np.full(n, np.nan, np.float32).tobytes())
    return Args((device.create_buffer(x.tobytes()), device.create_buffer(b.tobytes()), out), (n, 1.5)), 1.5 * x + b


def test_a_bundled_vec4_winner_for_an_n_that_4_does_not_divide_is_not_used(device, caplog):
    tunables = fma_set()
    vec4 = next(k.name for k in tunables.candidates if k.name.startswith("vec4") and not k.name.endswith("_tail"))
    args, want = fma_call(device, N_ODD)
    tuner = tuner_on(device)
    seeded(tuner, tunables, args, vec4)
    with caplog.at_level("WARNING", logger="wgtune"):
        ran = tuner.execute(tunables, args)
    assert ran.name != vec4
    got = np.frombuffer(device.read_buffer_sync(args.buffers[2]), np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # the last elements too: none left NaN
    assert tuner.results(tunables, tunables.key(args)) is not None  # tuned, not served from the bundle


ADD_ONE = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(WG) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&y)) { y[g.x] = x[g.x] + ADD; }
}
"""


def add_set() -> TunableSet:
    def candidate(name: str, wg: int, add: str) -> Kernel:
        source = ADD_ONE.replace("WG", str(wg)).replace("ADD", add)
        return Kernel(name, source, grid=lambda args, wg=wg: (-(-args.params[0] // wg), 1, 1))

    return TunableSet("add_one_elsewhere", [candidate("wg64", 64, "1.0"), candidate("wg128", 128, "1.0"),
                                            candidate("fast_wrong", 256, "2.0"), candidate("wg256", 256, "1.0")],
                      key=lambda args: {"n": args.params[0]})


def add_call(device: NativeDevice, n: int = 4096) -> tuple[Args, np.ndarray]:
    x = np.arange(n, dtype=np.float32)
    y = device.create_buffer(np.full(n, np.nan, np.float32).tobytes())
    return Args({"x": device.create_buffer(x.tobytes()), "y": y}, (n,)), x + 1


def test_a_wrong_collected_winner_is_refused_when_checked_and_the_key_is_tuned(device, caplog):
    tunables = add_set()
    args, want = add_call(device)
    tuner = tuner_on(device)
    seeded(tuner, tunables, args, "fast_wrong")
    with caplog.at_level("WARNING", logger="wgtune"):
        ran = tuner.execute(tunables, args)
    assert ran.name != "fast_wrong"
    said = " ".join(record.message for record in caplog.records)
    assert "fast_wrong" in said and "not checked on this device, is not used" in said
    assert "disagrees with the 2 candidates that agree" in said
    np.testing.assert_array_equal(np.frombuffer(device.read_buffer_sync(args.buffer("y")), np.float32), want)
    results = {result.name: result for result in tuner.results(tunables, tunables.key(args))}
    assert isinstance(results["fast_wrong"], Mismatch)


def test_a_right_bundled_winner_serves_without_a_tune_checked_once_a_process_and_is_never_stored(device):
    tunables = add_set()
    args, want = add_call(device, 2048)
    events: list = []
    tuner = tuner_on(device, events)
    seeded(tuner, tunables, args, "wg128")
    assert tuner.execute(tunables, args).name == "wg128"
    assert not [event for event in events if isinstance(event, TuneStarted)]
    np.testing.assert_array_equal(np.frombuffer(device.read_buffer_sync(args.buffer("y")), np.float32), want)
    compiled = set(tuner.pipelines.compiled)
    assert tuner.execute(tunables, add_call(device, 2048)[0]).name == "wg128"
    assert set(tuner.pipelines.compiled) == compiled  # checked once in this process: no panel again
    # The store holds what this device decided, not a bundle's winners (docs/fleets.md): a newer
    # bundle's replace them, and a tuner without the bundle tunes the key.
    assert tuner.store.load() == []
    again = Tuner(device, store=tuner.store, config=tuner.config)
    assert again.execute(tunables, args).name != "fast_wrong"
    assert {entry.winner_name for entry in again.store.load()} != set()  # tuned and stored here
