"""Candidates made per key (sizes baked into the source): a set of their own for each key."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, make_tuner

from wgtune import ConfigError, Hit, Kernel, Key, MemoryStore, Space, TunableSet

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

made: list[dict] = []


def baked(key: dict) -> list[Kernel]:
    """Two workgroup sizes of a kernel whose length is a constant of its source."""
    made.append(key)
    space = Space("scale", params={"WG": [64, 128]}, default={"WG": 64},
                  render=lambda p: f"const N: u32 = {key['n']}u;\n@compute @workgroup_size({p['WG']}) fn main() {{}}\n",
                  grid=lambda p, args: (-(-args.params[0] // p["WG"]), 1, 1))
    return space.candidates()


def per_key_set(**options) -> TunableSet:
    return TunableSet("scale", baked, lambda args: {"n": args.params[0]}, **options)


def test_each_key_gets_its_own_candidates_made_once_with_its_own_checksum():
    made.clear()
    tunables = per_key_set()
    device = FakeDevice()
    tuner = make_tuner(device)
    for n in (1000, 1000, 2000):
        tuner.execute(tunables, call(device, [1.0], n=n))
    assert made == [{"n": 1000}, {"n": 2000}]  # once per key, then kept
    small, large = tunables.for_key(Key({"n": 1000})), tunables.for_key(Key({"n": 2000}))
    assert small.name == "scale[n=1000]" and "const N: u32 = 1000u;" in small.candidates[0].wgsl
    assert small.checksum != large.checksum
    assert isinstance(tuner.fastest(tunables, Key({"n": 2000})), Hit)
    assert device.compiles["scale[WG=64]"] == 2  # the same name in two sets: compiled per key
    assert tuner.results(tunables, Key({"n": 1000}))[0].name == "scale[WG=64]"


def test_a_stored_winner_of_a_key_is_a_hit_in_the_next_process_without_a_tune():
    store = MemoryStore()
    device = FakeDevice()
    device.script("scale[WG=128]", duration=1e-4)
    first = make_tuner(device, store=store)
    first.execute(per_key_set(), call(device, [1.0], n=1000))
    profiles = device.profile_count
    again = make_tuner(device, store=store)
    kernel = again.execute(per_key_set(), call(device, [1.0], n=1000))
    assert kernel.name == "scale[WG=128]" and device.profile_count == profiles


def test_candidates_that_cannot_be_made_for_a_key_are_a_config_error_naming_it():
    def broken(key: dict) -> list[Kernel]:
        raise ValueError("no template for odd sizes")

    tunables = TunableSet("broken", broken, lambda args: {"n": args.params[0]})
    device = FakeDevice()
    with pytest.raises(ConfigError, match=r"'broken': its candidates for \[n=7\] could not be made: ValueError"):
        make_tuner(device).execute(tunables, call(device, [1.0], n=7))
    with pytest.raises(ConfigError, match="makes its candidates per key: name the key"):
        make_tuner(device).fallback(tunables)


def test_a_per_key_set_is_its_own_type_and_the_tuner_resolves_it_once_at_the_door(monkeypatch):
    from wgtune import PerKeySet
    from wgtune.cache import TuneCache
    from wgtune.runner import run_inline
    from wgtune.settling import Settler
    from wgtune.tune.pipelines import PipelineCache

    tunables = per_key_set()
    assert isinstance(tunables, PerKeySet) and not isinstance(tunables, TunableSet)
    assert isinstance(tunables.for_key(Key({"n": 7})), TunableSet)
    seen: list[object] = []  # what the inner paths were handed

    def spy(cls, name):
        inner = getattr(cls, name)

        def recording(self, tunables, *args, **kwargs):
            seen.append(tunables)
            return inner(self, tunables, *args, **kwargs)

        monkeypatch.setattr(cls, name, recording)

    for cls, name in ((Settler, "claim"), (Settler, "settle"), (Settler, "snapshot"), (TuneCache, "claim"),
                      (TuneCache, "adopt"), (TuneCache, "entry"), (PipelineCache, "fallback"),
                      (PipelineCache, "compile"), (PipelineCache, "prepare")):
        spy(cls, name)
    resolved: list[Key] = []
    for_key = PerKeySet.for_key
    monkeypatch.setattr(PerKeySet, "for_key", lambda self, key: resolved.append(key) or for_key(self, key))
    device = FakeDevice()
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0], n=1000))
    assert resolved == [Key({"n": 1000})]  # once for the whole call, tune included
    tuner.check_tune(tunables, Key({"n": 2000}), call(device, [1.0], n=2000))
    run_inline(tuner.tune_async(tunables, call(device, [1.0], n=3000)))
    tuner.fastest(tunables, Key({"n": 2000}))
    run_inline(tuner.prepare(tunables, Key({"n": 4000})))
    tuner.fallback(tunables, Key({"n": 4000}))
    tuner.results(tunables, Key({"n": 1000}))
    assert len(resolved) == 7  # one resolution per public call
    assert seen and all(isinstance(found, TunableSet) for found in seen), [type(found) for found in seen]
    with pytest.raises(ConfigError, match="makes its candidates per key: name the key"):
        tuner.fallback(tunables)
