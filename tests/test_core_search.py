"""Search over sets too large to measure whole: the strategies alone, then a tune that searches."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet

from wgtune import ConfigError, Kernel, Search, Skip, Space, StoredEntry, StoreError, TunableSet
from wgtune.search import option_error, register_strategy, registered_strategies, registry
from wgtune.search.run import SearchRun, replay
from wgtune.search.strategies import ModelOptions, ModelStrategy, RandomStrategy
from wgtune.search.surrogate import AdditiveModel

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

TILES = [1, 2, 4, 8, 16, 32, 64, 128]


def tile_time(p: dict) -> float:
    """A tiled kernel's time, shaped like real ones: each tile side has a sweet spot, the tile's
    area costs registers past a point, and the workgroup's size interacts with the tile's width."""
    time = 1.0 + 0.3 * abs(math.log2(p["TM"]) - 3) + 0.2 * abs(math.log2(p["TN"]) - 4)
    time *= 1.0 + max(0.0, math.log2(p["TM"] * p["TN"]) - 7) * 0.8  # register spill past 128
    time *= 1.0 + 0.15 * abs(math.log2(p["WG"] * p["TN"]) - 9)
    return time * 1e-3


def grid_points() -> list[dict]:
    return [{"TM": tm, "TN": tn, "WG": wg} for tm in TILES for tn in TILES for wg in (32, 64, 128, 256)]


def simulate(strategy, points: list[dict], budget: int) -> float:
    """Run a strategy against known times: the best time among what it measured."""
    observed: dict[int, float | None] = {}
    while len(observed) < budget:
        batch = strategy.propose(observed, min(8, budget - len(observed)))
        assert batch and not set(batch) & set(observed), "a strategy proposes only what is not observed"
        observed.update((index, tile_time(points[index])) for index in batch)
    return min(value for value in observed.values() if value is not None)


def test_search_settings_are_checked_and_named():
    with pytest.raises(ConfigError, match="strategy 'grid' is not one of model, random"):
        Search("grid")
    with pytest.raises(ConfigError, match=r"fraction must be in \(0, 1\]"):
        Search(candidates=1.5)
    with pytest.raises(ConfigError, match="measure at least one"):
        Search(candidates=0)
    with pytest.raises(ConfigError, match="seconds -1"):
        Search(seconds=-1)
    with pytest.raises(ConfigError, match=r"search must be a wgtune\.Search"):
        make_set("a", search="model")


def test_strategies_are_found_by_name_and_their_options_checked_when_the_search_is_made():
    assert {"model", "random"} <= set(registered_strategies())
    assert Search("model", options={"local_share": 0.5}).configured == ModelOptions(local_share=0.5)
    assert Search().options == {} and Search() == Search("model", options={})
    with pytest.raises(ConfigError, match=r"strategy 'model': unknown option 'share' \(its options: local_share, "):
        Search(options={"share": 0.5})
    with pytest.raises(ConfigError, match=r"strategy 'model': option local_share=1\.5: a fraction in \[0, 1\]"):
        Search(options={"local_share": 1.5})
    with pytest.raises(ConfigError, match=r"strategy 'model': option leaders=0: a count of at least 1"):
        Search("model", options={"leaders": 0})
    with pytest.raises(ConfigError, match=r"strategy 'random': unknown option 'seed' \(its options: none\)"):
        Search("random", options={"seed": 1})
    with pytest.raises(ConfigError, match="options must be a mapping"):
        Search(options=[("leaders", 2)])


@dataclass(frozen=True)
class InOrder:
    """A strategy for the tests: the pool in order, ``skip`` candidates apart."""

    skip: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.skip, int) or self.skip < 0:
            raise option_error("in_order", "skip", self.skip, "a count >= 0")

    def start(self, pool, parameters, budget, seed):
        return Ordered(list(pool)[:: self.skip + 1])


class Ordered:
    def __init__(self, order):
        self.order = order

    def propose(self, observed, count):
        return [index for index in self.order if index not in observed][:count]


@pytest.fixture
def own_registry(monkeypatch):
    """The registry as it is, restored after the test."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def test_a_registered_strategy_is_searched_by_name_with_its_options_checked(own_registry):
    register_strategy("in_order", InOrder)
    assert registered_strategies()[-1] == "in_order"
    with pytest.raises(ConfigError, match=r"strategy 'grid' is not one of in_order, model, random"):
        Search("grid")
    with pytest.raises(ConfigError, match=r"strategy 'in_order': option skip=-1: a count >= 0"):
        Search("in_order", options={"skip": -1})
    with pytest.raises(ConfigError, match="'in_order' is registered already"):
        register_strategy("in_order", ModelOptions)
    points = [None] * 100
    assert replay(Search("in_order", candidates=10, options={"skip": 1}), points, lambda i: 1.0) == [
        [0], [2, 4, 6, 8, 10, 12, 14, 16], [18]]


def test_a_registered_strategy_drives_a_tune_and_is_named_in_the_entry(own_registry):
    register_strategy("in_order")(InOrder)
    tunables, _space = tile_space(strategy="in_order", candidates=12)
    device = FakeDevice()
    scripted(device, tunables)
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    assert sorted(tunables.index_of[name] for name in device.compiles) == list(range(12))
    (entry,) = tuner.store.load()
    assert entry.policy == "search:in_order" and entry.not_run == "not run: the search (in_order) measured 12 of 256"


def test_a_strategy_that_proposes_outside_the_pool_or_twice_is_stopped_before_anything_is_measured(own_registry):
    @register_strategy("bad")
    @dataclass(frozen=True)
    class Bad:
        proposal: tuple = ()

        def start(self, pool, parameters, budget, seed):
            return type("Fixed", (), {"propose": lambda _self, observed, count: list(self.proposal)})()

    for proposal, why in [((1, 1), "proposed candidate 1 again"), ((0,), "proposed candidate 0 again"),
                          ((500,), "proposed 500, not a candidate of the pool"),
                          (tuple(range(1, 10)), "proposed 9 candidates, asked for 8")]:
        run = SearchRun(Search("bad", candidates=20, options={"proposal": proposal}), range(100), [None] * 100)
        assert run.next_batch() == [0]
        run.observe(0, 1.0)
        with pytest.raises(ConfigError, match=f"search strategy 'bad' {why}"):
            run.next_batch()


def test_the_budget_is_a_count_or_a_fraction_with_a_floor():
    assert Search(candidates=50).budget(1000) == 50
    assert Search(candidates=50).budget(20) == 20
    assert Search(candidates=0.05).budget(1000) == 50
    assert Search(candidates=0.001).budget(1000) == 16


def test_random_proposes_each_candidate_once_in_a_seeded_order():
    first = RandomStrategy(range(100), seed=3).propose({}, 100)
    assert sorted(first) == list(range(100)) and first != list(range(100))
    assert RandomStrategy(range(100), seed=3).propose({}, 100) == first
    assert RandomStrategy(range(100), seed=3).propose(dict.fromkeys(first[:10]), 5) == first[10:15]


def test_the_additive_model_ranks_an_additive_function_right_and_predicts_the_average_for_the_unseen():
    points = [(a, b) for a in range(6) for b in range(6)]
    seconds = [2.0 ** (a + 0.3 * b) for a, b in points]
    model = AdditiveModel(2).fit(points, seconds)
    predicted = [model.predict(point) for point in points]
    assert sorted(range(36), key=predicted.__getitem__) == sorted(range(36), key=seconds.__getitem__)
    assert model.predict((99, 99)) == pytest.approx(sum(math.log(s) for s in seconds) / 36)


def test_the_model_finds_a_near_best_configuration_with_a_small_budget_more_often_than_random():
    points = grid_points()
    best = min(tile_time(p) for p in points)
    budget = 40  # of 256, one of which is within 2% of the best
    model_hits = random_hits = 0
    for seed in range(10):
        model_hits += simulate(ModelStrategy(range(len(points)), points, budget, seed), points, budget) <= best * 1.02
        random_hits += simulate(RandomStrategy(range(len(points)), seed), points, budget) <= best * 1.02
    assert model_hits >= 6 and model_hits >= random_hits + 4


def test_a_failed_candidate_steers_the_model_away_from_its_values():
    points = [{"A": a, "B": b} for a in range(4) for b in range(4)]
    strategy = ModelStrategy(range(16), points, budget=16, seed=0)
    strategy.warmup = 0
    observed = {0: 1.0, 1: None, 4: 1.0, 5: None}  # B=1 failed twice
    proposed = strategy.propose(observed, 4)
    assert all(points[index]["B"] != 1 for index in proposed[:3])


# -- a tune that searches --------------------------------------------------------------------

def tile_space(**search) -> tuple[TunableSet, Space]:
    space = Space("tile", params={"TM": TILES, "TN": TILES, "WG": [32, 64, 128, 256]},
                  default={"TM": 1, "TN": 1, "WG": 64}, render=lambda p: f"// tile {p}\n",
                  grid=lambda p, args: (1, 1, 1))
    return make_set(*space.candidates(), name="tile", search=Search(**search)), space


def scripted(device: FakeDevice, tunables: TunableSet) -> None:
    for kernel in tunables.candidates:
        device.script(kernel.name, duration=tile_time(kernel.configuration))


def test_a_search_measures_its_budget_and_says_why_the_rest_were_not_run():
    tunables, _space = tile_space(candidates=40)
    device = FakeDevice()
    scripted(device, tunables)
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    assert len(device.compiles) == 40 and device.compiles[tunables.candidates[0].name] == 1  # the default first
    results = tuner.results(tunables, tunables.key(call(device, [1.0])))
    not_run = [r for r in results if type(r).__name__ == "Skip"]
    assert len(not_run) == len(tunables) - 40
    assert not_run[0].reason == "not run: the search (model) measured 40 of 256"
    best = min(tile_time(k.configuration) for k in tunables.candidates)
    winner = tunables.candidates[tuner.fastest(tunables, tunables.key(call(device, [1.0]))).index]
    assert tile_time(winner.configuration) <= best * 1.02


def test_a_set_without_configurations_is_searched_at_random_and_a_short_circuit_ends_it():
    candidates = [Kernel(f"k{i}", f"// k{i}\n", grid=lambda args: (1, 1, 1)) for i in range(100)]
    tunables = TunableSet("plain", candidates, lambda args: {"n": args.params[0]},
                          search=Search(candidates=30, seed=1), short_circuit=lambda key: 1e-4)
    device = FakeDevice()
    for i in range(100):
        device.script(f"k{i}", duration=1e-3 if i != 99 else 5e-5)
    tuner = make_tuner(device, quiet())
    tuner.execute(tunables, call(device, [1.0]))
    order = RandomStrategy(range(1, 100), seed=1).propose({}, 99)
    reached = order.index(99) < 29  # the default, then 29 proposals
    assert len(device.compiles) == (2 + order.index(99) if reached else 30)
    assert (tuner.fastest(tunables, tunables.key(call(device, [1.0]))).index == 99) == reached


def test_the_entry_keeps_the_unchosen_as_nulls_under_one_reason_and_reads_back_named():
    tunables, _space = tile_space(candidates=20)
    device = FakeDevice()
    scripted(device, tunables)
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    key = tunables.key(call(device, [1.0]))
    (entry,) = tuner.store.load()
    assert entry.policy == "search:model" and entry.not_run == "not run: the search (model) measured 20 of 256"
    assert sum(result is None for result in entry.results) == 236
    text = json.dumps(entry.to_json())
    assert len(text) < 20_000  # a Skip result naming each of 236 candidates would take ~25 kB
    again = StoredEntry.from_json(json.loads(text))
    assert again == entry
    fresh = make_tuner(device, store=tuner.store)
    results = fresh.results(tunables, key)
    assert [r.name for r in results] == [k.name for k in tunables.candidates]
    assert sum(isinstance(r, Skip) and r.reason == entry.not_run for r in results) == 236
    with pytest.raises(StoreError, match="null only under a not_run reason"):
        StoredEntry.from_json({**json.loads(text), "not_run": None})


def test_a_set_too_large_to_measure_one_by_one_needs_a_search():
    candidates = [Kernel(f"k{i}", "// k\n", grid=lambda args: (1, 1, 1)) for i in range(10_001)]
    with pytest.raises(ConfigError, match="10001 candidates, more than a tune measures one by one"):
        TunableSet("huge", candidates, lambda args: {"n": 1})
    assert len(TunableSet("huge", candidates, lambda args: {"n": 1}, search=Search())) == 10_001
