"""A dry run through the library (``open_tuner``, ``Config.dry_run`` or ``WGTUNE_DRY_RUN``) stores
nothing: with nothing stored it makes no database (once, opening the store made an empty one), and
with winners stored it reads them (hits) and leaves the database as it was. ``wgtune tune
--dry-run`` goes through the same path (``tests/test_cli_early_errors.py``)."""

from __future__ import annotations

import struct

import pytest
from wgsl_samples import scale

import wgtune
from wgtune.backends.local import dry_run_leaves_unmade, open_tuner
from wgtune.backends.sqlite_store import DATABASE_NAME
from wgtune.state import Hit
from wgtune.tune.events import TuneStarted


@pytest.fixture(autouse=True)
def no_settings_of_the_environment(monkeypatch):
    for name in ("WGTUNE_CACHE", "WGTUNE_CACHE_DIR", "WGTUNE_RECORDS", "WGTUNE_PIN", "WGTUNE_DRY_RUN",
                 "WGTUNE_CHECKS", "WGTUNE_LOG", "WGTUNE_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def device():
    from wgtune.backends.native import NativeDevice

    return NativeDevice.open()


def scale_set() -> wgtune.TunableSet:
    candidates = [wgtune.Kernel(f"wg{wg}", scale(2, wg), workgroup_size=(wg, 1, 1),
                                grid=lambda args, wg=wg: ((args.params[0] + wg - 1) // wg, 1, 1)) for wg in (32, 64)]
    return wgtune.TunableSet("dry-run-scale", candidates, key=lambda a: {"n": wgtune.anchor(a.params[0])})


SCALE = scale_set()


def run_keys(tuner: wgtune.Tuner, device, sizes=(1000, 5000)) -> list[wgtune.TuneState]:
    states = []
    for n in sizes:
        args = wgtune.Args((device.create_buffer(struct.pack(f"{n}f", *range(n))), device.create_buffer(size=4 * n)),
                           params=(n,))
        tuner.execute(SCALE, args)
        states.append(tuner.fastest(SCALE, tuner.key(SCALE, args)))
    return states


def tuner_on(device, events: list, config: wgtune.Config | None = None) -> wgtune.Tuner:
    return open_tuner(device, config=config, observer=events.append, isolate=False)


def quick(cache, **fields) -> wgtune.Config:
    return wgtune.Config(cache_dir=str(cache), log_level="disabled", samples=3, warmups=1, **fields)


@pytest.mark.parametrize("how", ["Config(dry_run=True)", "WGTUNE_DRY_RUN=1"])
def test_a_dry_run_through_the_library_with_nothing_stored_makes_no_database(device, tmp_path, monkeypatch, how):
    cache = tmp_path / "cache"
    if how == "WGTUNE_DRY_RUN=1":
        for name, value in (("WGTUNE_DRY_RUN", "1"), ("WGTUNE_CACHE_DIR", str(cache)), ("WGTUNE_SAMPLES", "3"),
                            ("WGTUNE_WARMUPS", "1")):
            monkeypatch.setenv(name, value)
        config = None  # open_tuner reads the environment
    else:
        config = quick(cache, dry_run=True)
    events: list[object] = []
    tuner = tuner_on(device, events, config)
    assert tuner.config.dry_run and tuner.config.cache and tuner.store is None
    assert dry_run_leaves_unmade(tuner.config) == str(cache / DATABASE_NAME)
    assert all(isinstance(state, Hit) for state in run_keys(tuner, device))
    assert sum(isinstance(event, TuneStarted) for event in events) == 2  # every key tuned, in this process
    assert not cache.exists()


def test_a_dry_run_through_the_library_reads_the_winners_stored_and_writes_nothing(device, tmp_path):
    cache = tmp_path / "cache"
    events: list[object] = []
    tuner = tuner_on(device, events, quick(cache))
    winners = run_keys(tuner, device)
    assert tuner.store is not None and tuner.store.count() == 2
    tuner.store.database.close()
    before = {path.name: path.read_bytes() for path in cache.iterdir()}
    assert list(before) == [DATABASE_NAME]

    events.clear()
    dry = tuner_on(device, events, quick(cache, dry_run=True))
    assert dry_run_leaves_unmade(dry.config) is None and dry.store is not None
    assert run_keys(dry, device) == winners
    assert not any(isinstance(event, TuneStarted) for event in events)  # hits: nothing tuned
    dry.store.database.close()
    assert {path.name: path.read_bytes() for path in cache.iterdir()} == before
