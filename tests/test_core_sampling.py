"""The sampling policies on the fake device with scripted noise: the adaptive policy (the default)
against the fixed one (CubeCL's), early elimination, budgets, short circuit and the confidence kept."""

from __future__ import annotations

import random

import pytest
from fakes import FakeDevice, call, kernel, make_set, make_tuner, quiet, stored_results

from wgtune import MISS, Config, ConfigError, Group, Key, TuneRecord, run_inline
from wgtune.config import Policy
from wgtune.gpu.device import Timing
from wgtune.tune import measure
from wgtune.tune.adaptive import MIN_SAMPLES, elimination_margin
from wgtune.tune.measure import calibrate
from wgtune.tune.request import TuneRequest
from wgtune.tune.tuning import measure_key

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


class Machine:
    """A scripted machine every candidate's samples share: a global count of timed passes, so
    that noise can depend on *when* a sample is taken (drift), not on which candidate it is."""

    def __init__(self, seed: int = 0, slow: range = range(0), slowdown: float = 1.0, jitter: float = 0.0,
                 spikes: float = 0.0) -> None:
        self.calls = 0
        self.rng = random.Random(seed)
        self.slow, self.slowdown, self.jitter, self.spikes = slow, slowdown, jitter, spikes

    def duration(self, true_seconds: float):
        def sample(_call: int) -> float:
            self.calls += 1
            factor = self.slowdown if self.calls in self.slow else 1.0
            noise = 1.0 + self.jitter * self.rng.random()  # the machine only ever slows a run down
            if self.spikes and self.rng.random() < self.spikes:
                noise *= 3.0  # descheduled
            return true_seconds * factor * noise

        return sample


def tune(device: FakeDevice, tunables, **config):
    tuner = make_tuner(device, config=quiet(**config))
    winner = tuner.execute(tunables, call(device, [1.0]))
    return tuner, winner.name


# -- the case a fixed policy gets wrong ----------------------------------------------------------


def test_drift_fools_the_fixed_policy_but_not_the_adaptive_one():
    """The machine runs at half speed for a while (another job, a thermal limit). Sampled one
    candidate after another, the faster one takes all its samples in the slow spell and loses;
    sampled round robin, both see the spell alike and the faster one wins."""
    truth = {"a": 1.00e-3, "b": 0.95e-3}  # b is 5% faster

    def run(policy: str) -> str:
        device = FakeDevice()
        machine = Machine(slow=range(12, 40), slowdown=2.0, jitter=0.01)
        for name, seconds in truth.items():
            device.script(name, duration=machine.duration(seconds))
        _, winner = tune(device, make_set("a", "b"), policy=policy, samples=10)
        return winner

    assert run("fixed") == "a"  # regret 5%: fooled
    assert run("adaptive") == "b"


def test_the_adaptive_policy_finds_the_best_in_a_later_priority_group():
    device = FakeDevice()
    device.script("safe", duration=2e-3)
    device.script("bold", duration=1e-3)
    tunables = make_set(kernel("safe", group=Group("likely", 2)), kernel("bold", group=Group("unlikely", 1)))
    assert tune(device, tunables, policy="fixed")[1] == "safe"  # the fixed policy never looks past the first batch
    device = FakeDevice()
    device.script("safe", duration=2e-3)
    device.script("bold", duration=1e-3)
    assert tune(device, tunables)[1] == "bold"


@pytest.mark.parametrize("seed", range(12))
def test_under_one_sided_noise_and_spikes_the_adaptive_pick_is_within_two_percent(seed):
    rng = random.Random(seed)
    truth = {f"c{i}": 1e-3 * (1 + rng.choice([0, 0.03, 0.06, 0.1, 0.5, 1.0, 3.0])) for i in range(8)}
    device = FakeDevice()
    machine = Machine(seed=seed, jitter=0.05, spikes=0.05)
    for name, seconds in truth.items():
        device.script(name, duration=machine.duration(seconds))
    _, winner = tune(device, make_set(*truth))
    assert truth[winner] / min(truth.values()) - 1 <= 0.02, (winner, truth)


# -- where the time goes -------------------------------------------------------------------------


def test_a_later_group_whose_first_two_lose_the_screening_is_skipped_and_a_close_one_screened_whole():
    device = FakeDevice()
    times = {"a0": 1e-3, "a1": 1.1e-3, "b0": 3e-3, "b1": 2.5e-3, "b2": 0.5e-3, "c0": 1.5e-3, "c1": 4e-3, "c2": 0.9e-3}
    for name, seconds in times.items():
        device.script(name, duration=seconds)
    groups = {"a": Group("likely", 3), "b": Group("unlikely", 2), "c": Group("maybe", 1)}
    tunables = make_set(*(kernel(name, group=groups[name[0]]) for name in times))
    tuner, winner = tune(device, tunables)
    assert winner == "c2"  # group c's first candidate was within twice the leader: all of c ran
    assert "b2" not in device.compiles  # b's first two were over twice the leader: the rest of b never ran
    assert "first 2 candidates were each over twice" in stored_results(tuner, tunables)["b2"]["reason"]
    assert [trial.name for trial in tuner.records.records[0].trials] == ["a0", "a1", "b0", "b1", "c0", "c1", "c2"]


def test_the_sets_default_sets_the_bar_and_a_slow_group_is_pruned_even_in_the_first_batch():
    # What the few-rows matmul kernels do on a CPU adapter: the plan's likeliest group is over
    # twice the set's default there, and the group that wins comes later.
    device = FakeDevice()
    times = {"default": 2e-3, "r0": 9e-3, "r1": 7e-3, "r2": 0.5e-3, "r3": 8e-3, "t0": 1e-3, "t1": 1.5e-3}
    for name, seconds in times.items():
        device.script(name, duration=seconds)
    groups = {"d": Group("tiles", 1), "r": Group("rows", 2), "t": Group("tiles", 1)}
    tunables = make_set(*(kernel(name, group=groups[name[0]]) for name in times))
    tuner, winner = tune(device, tunables)
    assert winner == "t0"
    trials = [trial.name for trial in tuner.records.records[0].trials]
    assert trials[:3] == ["default", "r0", "r1"]  # the default first, though the rows batch comes first
    assert "r2" not in trials and "r3" not in trials and "r2" not in device.compiles
    assert "first 2 candidates were each over twice" in stored_results(tuner, tunables)["r3"]["reason"]


def test_a_first_batch_group_that_beats_the_bar_is_screened_whole():
    device = FakeDevice()
    times = {"default": 5e-3, "r0": 2e-3, "r1": 3e-3, "r2": 0.5e-3}
    for name, seconds in times.items():
        device.script(name, duration=seconds)
    groups = {"d": Group("tiles", 1), "r": Group("rows", 2)}
    tuner, winner = tune(device, make_set(*(kernel(name, group=groups[name[0]]) for name in times)))
    assert winner == "r2"
    assert [trial.name for trial in tuner.records.records[0].trials][:4] == ["default", "r0", "r1", "r2"]


def test_a_stalled_first_reading_does_not_leave_a_short_kernel_timed_one_dispatch_at_a_time(monkeypatch):
    # Issue 29 on an H200: a 9 us kernel's first calibration reading stalled past the sample floor,
    # so it was sampled one dispatch a pass, where a pass's own cost is most of a sample.
    # The first launch's wall clock as a quiet machine reads it: on a loaded one (Pyodide in a busy CI) it
    # passed the floor, which rightly confirms a first reading, and the test read a timing margin.
    launch = measure._timed_launch

    async def quiet_launch(*args, **kwargs) -> float:
        await launch(*args, **kwargs)
        return 1e-5

    monkeypatch.setattr(measure, "_timed_launch", quiet_launch)
    device = FakeDevice()
    device.script("steady", duration=2e-5)
    device.script("stalled", duration=lambda call: 0.05 if call == 0 else 1e-5)
    _, winner = tune(device, make_set("steady", "stalled"), min_sample=1e-3)
    assert winner == "stalled"
    repeats = device.profiles["stalled"]
    assert repeats[:2] == [1, 1]  # read again: the second reading is a hundredth of a sample
    assert min(repeats[2:]) * 1e-5 >= 1e-3  # every later sample lasts the floor


def test_calibration_reads_one_dispatch_again_only_where_the_first_launch_was_shorter_than_a_sample():
    device = FakeDevice()
    device.script("long", duration=5e-3)  # a dispatch lasts a sample (seconds on a CPU adapter, say)
    pipeline = run_inline(device.compile(kernel("long")))
    args = call(device, [1.0])
    assert run_inline(calibrate(device, pipeline, args, (1, 1, 1), 1e-3, first_launch=6e-3)) == (1, 5e-3)
    assert device.profiles["long"] == [1]  # its first launch said so already: not launched again for it
    assert run_inline(calibrate(device, pipeline, args, (1, 1, 1), 1e-3, first_launch=1e-4)) == (1, 5e-3)
    assert device.profiles["long"] == [1, 1, 1]  # a short first launch: one long reading is read again
    assert run_inline(calibrate(device, pipeline, args, (1, 1, 1), 1e-3)) == (1, 5e-3)
    assert device.profiles["long"] == [1, 1, 1, 1, 1]  # unknown: read again


class LoggedDevice(FakeDevice):
    """The fake device, logging its launches, waits and timed passes in order."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.events: list[tuple[str, ...]] = []
        self.on_profile = lambda name, repeats: self.events.append(("profile", name))

    def dispatch(self, pipeline, args, grid, repeats: int = 1) -> None:
        self.events.append(("dispatch", pipeline.kernel.name))
        super().dispatch(pipeline, args, grid, repeats)

    async def sync(self) -> None:
        self.events.append(("sync",))
        await super().sync()

    async def resolve(self, profile) -> float:
        self.events.append(("resolve",))
        return await super().resolve(profile)


@pytest.mark.parametrize("timing", [Timing.GPU_TIMESTAMP, Timing.WALL_CLOCK])
def test_timestamps_calibrate_a_candidate_on_an_idle_queue_after_its_launches(timing, monkeypatch):
    # Timestamps around a pass queued behind the warmups read more than the pass (lavapipe's first
    # readings 1.5-1.9x the next ones), and calibration's last reading is the candidate's first
    # sample. A wall-clock pass waits for the queue itself: no wait is added there (nor where no
    # warmup was queued: a wait is a round trip, some 100 ms in a browser on a CPU adapter).
    monkeypatch.setattr(measure, "WARMUP_SECONDS", 1e6)  # every warmup queued, however long the first launch
    device = LoggedDevice(timing=timing)
    device.script("a", duration=1e-3)
    device.script("b", duration=2e-3)
    tune(device, make_set("a", "b"), warmups=3)
    for name in ("a", "b"):
        first = device.events.index(("profile", name))
        launches = [event for event in device.events[:first] if event == ("dispatch", name)]
        assert len(launches) == 3  # its first launch and two warmups
        assert (device.events[first - 1] == ("sync",)) == (timing == Timing.GPU_TIMESTAMP), device.events[:first]


def test_no_wait_is_added_before_calibration_where_no_warmup_was_queued():
    # The first launch is the only warmup, and it was waited for: a device with timestamps waits no
    # more before calibrating than one whose passes wait for the queue themselves.
    before = {}
    for timing in (Timing.GPU_TIMESTAMP, Timing.WALL_CLOCK):
        device = LoggedDevice(timing=timing)
        device.script("a", duration=1e-3)
        tune(device, make_set("a", "b"), warmups=1)
        before[timing] = device.events[: device.events.index(("profile", "a"))]
    assert before[Timing.GPU_TIMESTAMP] == before[Timing.WALL_CLOCK]
    assert before[Timing.GPU_TIMESTAMP].count(("dispatch", "a")) == 1


def test_the_fixed_policys_samples_are_each_resolved_before_the_next_is_submitted():
    # Each sample is its own pass, resolved before the next is submitted: no timed pass waits behind the
    # tune's own (session 32 blamed the H200's 2.2x on passes submitted together; it was the idle clock).
    device = LoggedDevice()
    device.script("a", duration=1e-3)
    tune(device, make_set("a", "b"), policy="fixed", samples=5)
    timed = [event[0] for event in device.events if event[0] in ("profile", "resolve")]
    assert timed.count("profile") >= 10
    assert timed == ["profile", "resolve"] * (len(timed) // 2)


def test_a_stalled_first_sample_rules_out_neither_the_candidate_nor_its_group():
    # The same H200 tune: the flat group's first two kernels each read one stalled sample over
    # twice the bar, so the group was pruned and its best kernel never ran.
    device = FakeDevice()
    stalled_once = lambda call: 1e-3 if call == 1 else 1e-5  # noqa: E731 (call 0 calibrates, 1 is the first sample)
    times = {"bar": 2e-5, "f0": stalled_once, "f1": stalled_once, "f2": 0.5e-5}
    for name, seconds in times.items():
        device.script(name, duration=seconds)
    groups = {"b": Group("tiles", 1), "f": Group("flat", 2)}
    tuner, winner = tune(device, make_set(*(kernel(name, group=groups[name[0]]) for name in times)), min_sample=1e-3)
    assert winner == "f2"
    assert [trial.name for trial in tuner.records.records[0].trials] == ["bar", "f0", "f1", "f2"]
    assert all(stored_results(tuner, make_set("x"))[name]["samples"][1] == pytest.approx(1e-5) for name in ("f0", "f1"))


def test_hopeless_candidates_get_two_samples_and_close_rivals_many():
    device = FakeDevice()
    machine = Machine(jitter=0.02)
    for name, seconds in {"best": 1.0e-3, "close": 1.01e-3, "slow": 2.5e-3, "awful": 10e-3}.items():
        device.script(name, duration=machine.duration(seconds))
    tuner, winner = tune(device, make_set("awful", "slow", "close", "best"))
    counts = {name: len(result["samples"]) for name, result in stored_results(tuner, make_set("x")).items()}
    assert counts["slow"] == 2 and counts["awful"] == 2  # no candidate leaves on a single reading
    assert counts["best"] >= MIN_SAMPLES and counts["close"] >= MIN_SAMPLES
    assert winner in ("best", "close")  # within 1%: either is a right pick
    [record] = tuner.records.records
    assert {trial.name: trial.samples for trial in record.trials} == counts
    assert [trial.name for trial in record.trials] == ["awful", "slow", "close", "best"]


def test_the_finalists_are_told_once_screening_is_over_fastest_first_the_winner_among_them():
    # What a tuning process's guard compiles ahead on the tuner's own device (backends/isolation.py).
    device = FakeDevice()
    machine = Machine(jitter=0.02)
    for name, seconds in {"awful": 10e-3, "close": 1.01e-3, "best": 1.0e-3, "near": 1.03e-3}.items():
        device.script(name, duration=machine.duration(seconds))
    tunables = make_set("awful", "close", "best", "near")
    tuner = make_tuner(device, config=quiet())
    args = call(device, [1.0])
    told: list[list[int]] = []
    request = TuneRequest(device, tuner.pipelines, tuner.config, tunables, tuner.key(tunables, args), args,
                          finalists=told.append)
    outcome = run_inline(measure_key(request))
    [finalists] = told
    names = [tunables.candidates[index].name for index in finalists]
    assert "awful" not in names and set(names) <= {"best", "close", "near"} and len(names) >= 2
    assert names[0] in ("best", "close")  # within their jitter of each other
    assert outcome.winner in finalists


def test_the_margin_shrinks_with_samples_down_to_the_tolerance():
    assert elimination_margin(1, 0.01) == pytest.approx(1.0)
    assert elimination_margin(2, 0.01) == pytest.approx(0.25)
    assert elimination_margin(100, 0.01) == pytest.approx(0.01)


def test_finalists_that_never_separate_stop_at_max_samples():
    device = FakeDevice()
    machine = Machine(seed=3, jitter=0.5)  # noise far wider than the 0.5% gap
    device.script("a", duration=machine.duration(1.000e-3))
    device.script("b", duration=machine.duration(1.005e-3))
    tuner, _ = tune(device, make_set("a", "b"), max_samples=12, tolerance=0.0)
    counts = [len(result["samples"]) for result in stored_results(tuner, make_set("x")).values()]
    assert counts == [12, 12]


def test_a_zero_budget_ends_the_rounds_after_screening():
    device = FakeDevice()
    device.script("a", duration=1.000e-3)
    device.script("b", duration=1.001e-3)
    tuner, winner = tune(device, make_set("a", "b"), budget=0.0)
    assert winner == "a"
    assert [len(r["samples"]) for r in stored_results(tuner, make_set("x")).values()] == [1, 1]


def test_a_candidate_that_fails_mid_sampling_is_out_with_its_error():
    device = FakeDevice()
    device.script("a", duration=1e-3)
    failing = iter([1e-3, 1e-3])

    def flaky(_call: int) -> float:
        try:
            return next(failing)
        except StopIteration:
            raise RuntimeError("device lost") from None

    device.script("b", duration=flaky)
    tuner, winner = tune(device, make_set("a", "b"))
    assert winner == "a"
    assert stored_results(tuner, make_set("x"))["b"]["error"] == "Unknown"


# -- short circuit ------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["adaptive", "fixed"])
def test_a_candidate_within_the_short_circuit_limit_ends_the_tune_and_the_record_names_it(policy):
    device = FakeDevice()
    device.script("a", duration=3e-3)
    device.script("b", duration=0.9e-3)
    device.script("c", duration=0.5e-3)  # faster still, but the tune has ended
    limits = []
    tunables = make_set("a", "b", "c", short_circuit=lambda key: limits.append(key) or 1e-3)
    tuner, winner = tune(device, tunables, policy=policy)
    assert winner == "b"
    assert limits == [Key({"n": 4})]
    assert "c" not in device.profiles and "c" not in device.dispatches  # compiled with its batch, never run
    [record] = tuner.records.records
    assert record.short_circuit == "b"
    assert [trial.name for trial in record.trials] == ["a", "b"]
    assert "short-circuit" in stored_results(tuner, tunables)["c"]["reason"]
    assert TuneRecord.from_json(record.to_json()).short_circuit == "b"


def test_no_short_circuit_when_no_candidate_meets_the_limit():
    device = FakeDevice()
    device.script("a", duration=3e-3)
    device.script("b", duration=2e-3)
    tuner, winner = tune(device, make_set("a", "b", short_circuit=lambda key: 1e-3))
    assert winner == "b" and tuner.records.records[0].short_circuit is None


def test_a_short_circuit_that_is_not_a_function_is_a_config_error():
    with pytest.raises(ConfigError, match="short_circuit"):
        make_set("a", short_circuit=1e-3)


@pytest.mark.parametrize("bad", ["fast", -1.0, float("nan"), True])
def test_a_short_circuit_limit_that_is_not_a_time_fails_the_tune_naming_the_set(bad):
    device = FakeDevice()
    tuner = make_tuner(device)
    tunables = make_set("a", "b", short_circuit=lambda key: bad)
    with pytest.raises(ConfigError, match="'fake': short_circuit"):
        tuner.execute(tunables, call(device, [1.0]))
    assert tuner.states(tunables) == {Key({"n": 4}): MISS}  # nothing decided, not stuck Pending


# -- the confidence kept ------------------------------------------------------------------------


def test_a_clear_winner_is_stated_with_high_confidence_in_store_record_and_event():
    device = FakeDevice()
    # 1% noise: "a" is out after its second sample, and two rounds with more noise than that
    # cannot honestly rule out a tie (confidence.py: few rounds, wide interval).
    machine = Machine(seed=1, jitter=0.01)
    device.script("a", duration=machine.duration(1.3e-3))
    device.script("b", duration=machine.duration(1.0e-3))
    finished = []
    tuner = make_tuner(device, observer=lambda e: finished.append(e) if type(e).__name__ == "TuneFinished" else 0)
    tuner.execute(make_set("a", "b"), call(device, [1.0]))
    entry = tuner.store.entries[("fake", Key({"n": 4}))]
    sure = entry.confidence
    assert entry.winner_name == "b" and sure.runner_up == "a"
    assert 1.2 < sure.ratio < 1.4 and sure.low > 1.0 and sure.p_faster >= 0.95
    assert tuner.records.records[0].confidence == sure and finished[0].outcome.confidence == sure
    assert tuner.records.records[0].policy == entry.policy == "adaptive"


def test_a_tie_is_stated_as_one():
    device = FakeDevice()
    machine = Machine(seed=2, jitter=0.2)
    device.script("a", duration=machine.duration(1e-3))
    device.script("b", duration=machine.duration(1e-3))
    tuner, _ = tune(device, make_set("a", "b"), max_samples=20, tolerance=0.0)
    sure = tuner.store.entries[("fake", Key({"n": 4}))].confidence
    assert sure.low < 1.0 < sure.high
    assert 0.2 < sure.p_faster < 0.9


def test_a_single_measured_candidate_has_no_confidence():
    device = FakeDevice()
    device.script("b", compile_error="bad")
    tuner, winner = tune(device, make_set("a", "b"))
    assert winner == "a" and tuner.store.entries[("fake", Key({"n": 4}))].confidence is None


# -- settings -----------------------------------------------------------------------------------


def test_the_adaptive_policy_is_the_default_and_the_settings_come_from_the_environment():
    assert Config().policy is Policy.ADAPTIVE
    config = Config.from_env({"WGTUNE_POLICY": "fixed", "WGTUNE_BUDGET": "0.25", "WGTUNE_MAX_SAMPLES": "7",
                              "WGTUNE_CONFIDENCE": "0.9", "WGTUNE_TOLERANCE": "0.02"})
    assert (config.policy, config.budget, config.max_samples, config.confidence, config.tolerance) == (
        Policy.FIXED, 0.25, 7, 0.9, 0.02)


@pytest.mark.parametrize("env, named", [
    ({"WGTUNE_POLICY": "fastest"}, "WGTUNE_POLICY"),
    ({"WGTUNE_BUDGET": "-1"}, "WGTUNE_BUDGET"),
    ({"WGTUNE_BUDGET": "soon"}, "WGTUNE_BUDGET"),
    ({"WGTUNE_MAX_SAMPLES": "0"}, "WGTUNE_MAX_SAMPLES"),
    ({"WGTUNE_CONFIDENCE": "1.5"}, "confidence"),
    ({"WGTUNE_TOLERANCE": "2"}, "tolerance"),
])
def test_bad_settings_are_clear_errors(env, named):
    with pytest.raises(ConfigError, match=named):
        Config.from_env(env)
