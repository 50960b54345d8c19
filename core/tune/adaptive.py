"""The adaptive sampling policy (the default): sample candidates round robin, drop the hopeless
early, settle the rest.

Tuning time goes where the answer is in doubt. The policy runs in three parts:

1. **Screening**, in the plan's order (every batch, not only the first), after the bar (the
   set's default, its first candidate: ``Bench.bar``): each candidate is
   compiled, warmed up and calibrated, and the calibration's last reading (a full-length sample)
   is its first sample. One sample rules out a candidate at twice the leader's time, once a
   second confirms it (one reading may be a stalled one: no candidate leaves on a single one).
   A priority group whose first ``GROUP_PROBES`` screened candidates were all ruled out so is
   skipped for the rest, in the first batch too: the plan puts a group's likeliest first, and
   the bar or an earlier group has shown the group to be slow on this device (the few-rows
   matmul kernels lead the small keys on an H200 and took 4-90x the naive kernel's first launch on
   SwiftShader). Compiling is the dearest part of a screening in the browser, so there a
   pruned group's members past its probes are never compiled (``Device.compile_width``).
2. **Rounds**: every candidate still in the running gets one more sample per round, round
   robin, so that drift (clocks, heat, the rest of the machine) hits all of them alike. After
   each round a candidate whose *fastest* sample is slower than the leader's median by more than
   a margin is dropped. The margin shrinks as its samples grow (``SLACK / n**2``, never below the
   tolerance): one sample may be a descheduled one; four that all lose are not.
3. **Settling**: once the finalists have ``MIN_SAMPLES`` samples each, a rival leaves when the
   interval of its time over the leader's, round by round (``confidence.paired_ratio`` of the
   samples both took in the same rounds, ``confidence.in_same_rounds``: the
   spread of the rounds only, which more samples narrow), says at ``Config.confidence`` that it
   is at most ``Config.tolerance`` faster than the leader: then the leader is the right pick, or
   as good as it within the tolerance.

The rounds stop when one candidate is left, when every finalist has ``Config.max_samples``
samples, or when they have spent ``Config.budget`` seconds; the winner is the candidate with
the lowest median.

Where the candidates' outputs are judged by their agreement (no reference), the verdicts are
given once screening is over: every candidate that will run has run then, so the groups are
complete. A fast wrong candidate would otherwise lead the rounds and drop the right ones by its
time, leaving a winner picked on their first samples: the outvoted leave, and the candidates
the margin dropped come back into the rounds.

A candidate dropped by the margin before it had ``MIN_SAMPLES`` samples (at screening, with its
one sample, or in an early round) comes out as ``Measured(..., eliminated_early=True)``: it
lost clearly, but its median says little about by how much.

A set with a search is sampled by the same policy, over the candidates its strategy proposes
(``search_driver.py``).

In both policies, a candidate whose median is within the set's short-circuit limit for the key
(see :class:`~wgtune.sets.tunable.TunableSet`) ends the tune at once and wins.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import replace

from ..errors import Skip, candidate_failure
from ..store.confidence import in_same_rounds, median, paired_ratio
from ..store.results import Measured, Result
from .measure import Arm, Bench, prepare_candidate
from .plan import Plan
from .sampling import OnTrial, Sampled

__all__ = ["MIN_SAMPLES", "AdaptiveSampler", "elimination_margin", "sample_adaptively"]

# Samples each finalist has before the settling interval judges it.
MIN_SAMPLES = 5
# The elimination margin with one sample: its fastest sample must be twice the leader's median.
SLACK = 1.0
# Candidates of a priority group screened before the rest of the group is skipped, when each of
# them lost the screening (over twice the leader's time): the plan orders a group's likeliest
# members first, and a shader compile is the dearest part of a screening in the browser.
GROUP_PROBES = 2
# Candidates past the first batch compiled together ahead of their screening, at most (and no
# more than the device overlaps: ``Device.compile_width``).
COMPILE_AHEAD = 8
# Samples that confirm a candidate under the short-circuit limit before it ends the tune.
SHORT_CIRCUIT_SAMPLES = 3

def elimination_margin(samples: int, tolerance: float) -> float:
    """How much slower than the leader's median a candidate's fastest sample must be to drop it."""
    return max(tolerance, SLACK / samples**2)


class AdaptiveSampler:
    """The policy's state over one tune: the candidates still sampled and the results so far.

    ``screen`` then ``rounds`` then ``finish`` is the whole policy (:func:`sample_adaptively`);
    the search driver (``search_driver.py``) screens the strategy's batches one by one instead,
    reading what each showed with ``observed``.
    """

    def __init__(self, bench: Bench, on_trial: OnTrial, limit: float | None) -> None:
        self.bench, self.on_trial, self.limit = bench, on_trial, limit
        self.device, self.tunables, self.args, self.config = bench.device, bench.tunables, bench.args, bench.config
        self.step = bench.step
        self.sampled = Sampled()
        self.alive: list[Arm] = []
        self.round = 0  # the rounds taken so far in this tune (each sample of one is stamped with it)
        self.dropped: list[Arm] = []  # left by the margin: back in the rounds if the leader they lost to was wrong

    def _leave(self, arm: Arm, why: str, eliminated: bool = False) -> None:
        """``arm`` stops being sampled; its result is final. ``eliminated``: it lost by the margin
        (not settled by the interval), so with few samples its median is marked unreliable."""
        self.alive = [other for other in self.alive if other is not arm]
        if eliminated:
            self.dropped.append(arm)
        self._settle_result(arm, early=eliminated and len(arm.samples) < MIN_SAMPLES)
        self.step(f"{arm.name}: out after {len(arm.samples)} samples ({why})")

    def _settle_result(self, arm: Arm, early: bool = False) -> None:
        result = arm.result(self.device.timing)
        if early and isinstance(result, Measured):
            result = replace(result, eliminated_early=True)
        self._record(arm.index, result, arm.wall, len(arm.samples))

    def _record(self, index: int, result: Result, wall: float, samples: int) -> None:
        self.sampled.record(index, result, wall, samples)
        self.on_trial(index, result, wall)

    async def _sample(self, arm: Arm, count: int = 1, round_: int | None = None) -> bool:
        """One more sample of ``arm`` (in round ``round_`` of :meth:`rounds`, if it is one); a
        candidate that fails now is out with its error."""
        started = time.perf_counter()
        try:
            await arm.sample(self.device, self.args, count, round_)
        except Exception as error:
            failure: Result = candidate_failure(arm.name, error, "launch")
        else:
            arm.wall += time.perf_counter() - started
            return True
        arm.wall += time.perf_counter() - started
        self.alive = [other for other in self.alive if other is not arm]
        self._record(arm.index, failure, arm.wall, len(arm.samples))
        return False

    def _leader(self) -> Arm:
        return min(self.alive, key=self._standing)

    @staticmethod
    def _standing(arm: Arm) -> tuple[float, int]:
        return (median(arm.samples), arm.index)  # every arm in the running has a sample

    def _margin(self, arm: Arm) -> float:
        return elimination_margin(len(arm.samples), self.config.tolerance)

    def _losing(self, arm: Arm, leader: Arm) -> bool:
        """Whether ``arm``'s fastest sample loses to ``leader``'s median by the margin."""
        return arm is not leader and min(arm.samples) > median(leader.samples) * (1 + self._margin(arm))

    async def _eliminate(self) -> None:
        """Drop the candidates whose fastest sample loses to the leader's median by the margin.
        One that would leave on a single sample is sampled once more first: one reading may be a
        stalled one (the host descheduled while it encoded the pass), and with it a group's probes
        would prune the group."""
        for arm in [arm for arm in self.alive if not arm.samples]:
            self._leave(arm, "no valid sample")
        if not self.alive:
            return
        leader = self._leader()
        for arm in [arm for arm in self.alive if len(arm.samples) == 1 and self._losing(arm, leader)]:
            await self._sample(arm)
        if not self.alive:
            return
        leader = self._leader()
        best = median(leader.samples)
        for arm in list(self.alive):
            if self._losing(arm, leader):
                self._leave(arm, f"fastest {min(arm.samples):.3g}s > {1 + self._margin(arm):.3g} x leader {best:.3g}s",
                            eliminated=True)

    def _settle(self) -> None:
        """Drop the finalists the interval shows to be no better than the leader within tolerance."""
        if len(self.alive) < 2 or any(len(arm.samples) < MIN_SAMPLES for arm in self.alive):
            return
        leader = self._leader()
        for arm in list(self.alive):
            if arm is leader:
                continue
            interval = paired_ratio(*in_same_rounds(leader.samples, leader.rounds, arm.samples, arm.rounds),
                                    self.config.confidence)
            if interval.low > 1 - self.config.tolerance:
                self._leave(arm, f"settled against {leader.name}: ratio {interval.ratio:.3f} "
                                 f"({interval.low:.3f}-{interval.high:.3f})")

    async def _short_circuits(self, arm: Arm) -> bool:
        """Whether ``arm`` meets the set's time limit, confirmed on a few samples."""
        if self.limit is None or not arm.samples or min(arm.samples) > self.limit:
            return False
        missing = SHORT_CIRCUIT_SAMPLES - len(arm.samples)
        if missing > 0 and not await self._sample(arm, missing):
            return False
        return median(arm.samples) <= self.limit

    def _compile_next(
        self, coming: list[int], first: Collection[int], probed: dict[str, int], promising: set[str],
        spent: bool = False,
    ) -> list[int]:
        """Which of the ``coming`` candidates to compile together now. On a device that overlaps
        compiles (``Device.compile_width`` over 1), the rest of the first batch at once: together
        they cost about one. Otherwise, and past the first batch, only what the screening cannot
        prune before its turn: of a group still on probation (of any, once the screen budget is
        ``spent``) only its probes not yet run, so that a pruned group costs no compile past its
        probes; past the first batch, as many as the device overlaps, at most COMPILE_AHEAD (one
        at a time where it overlaps none, so the screen budget is checked before each)."""
        in_first = coming[0] in first
        if in_first and self.device.compile_width > 1:
            return [index for index in coming if index in first]
        batch: list[int] = []
        allowed: dict[str, int] = {}
        for index in coming:
            if in_first and index not in first:
                continue
            group = self.tunables.candidates[index].group
            if group is not None and (spent or group.name not in promising):
                left = allowed.setdefault(group.name, GROUP_PROBES - probed.get(group.name, 0))
                if left <= 0:
                    continue
                allowed[group.name] = left - 1
            batch.append(index)
            if len(batch) >= min(COMPILE_AHEAD, self.device.compile_width) and not in_first:
                break
        return batch

    def _compile_later(self, coming: list[int], ahead: set[int]) -> None:
        """Begin compiling, in the background, the ``coming`` candidates not ``ahead``, in order, as
        many as the device takes (``Device.background_compiles``): on a GPU they compile on the
        host's free cores while the GPU measures the ones before them. A group pruned later
        wastes its compiles, but no time: nothing waits for them."""
        rest = [index for index in coming if index not in ahead]
        self.bench.compile_later(rest, self.device.background_compiles)

    def _probe(self, index: int, probed: dict[str, int]) -> bool:
        """Whether candidate ``index`` is one of its group's first GROUP_PROBES screened."""
        group = self.tunables.candidates[index].group
        return group is not None and probed.get(group.name, 0) < GROUP_PROBES

    def _out_of_screen_budget(self, index: int) -> None:
        """Record a candidate past the first batch, and past its group's probes, that the screen
        budget leaves unscreened."""
        name, budget = self.tunables.candidates[index].name, self.config.screen_budget
        self._record(index, Skip(name, f"not screened: the tune had spent its screen budget ({budget}s), and "
                                       "its group's first candidates were screened"), 0.0, 0)

    def _pruned(self, index: int, probed: dict[str, int], promising: set[str]) -> bool:
        """Whether candidate ``index`` is skipped: in a group whose first GROUP_PROBES measured
        candidates all lost the screening (in the first batch too: to the bar, or to a candidate
        of another group)."""
        group = self.tunables.candidates[index].group
        if group is None or group.name in promising or probed.get(group.name, 0) < GROUP_PROBES:
            return False
        name = self.tunables.candidates[index].name
        reason = f"group {group.name}: its first {GROUP_PROBES} candidates were each over twice the leader's time"
        self._record(index, Skip(name, reason), 0.0, 0)
        return True

    async def screen(self, order: list[int], first: Collection[int] = ()) -> bool:
        """Prepare every candidate in ``order`` and take its first sample, pruning hopeless groups
        outside ``first``; True if a candidate short-circuits the tune."""
        probed: dict[str, int] = {}
        promising: set[str] = set()
        ahead: set[int] = set()  # compiled, or asked for, ahead of their preparation
        started_later = False  # the coming candidates begun in the background (once per screening)
        screening_since = time.perf_counter()
        for position, index in enumerate(order):
            spent = index not in first and time.perf_counter() - screening_since >= self.config.screen_budget
            if spent and not self._probe(index, probed):
                self._out_of_screen_budget(index)
                continue
            if self._pruned(index, probed, promising):
                continue
            if index not in ahead:
                batch = self._compile_next(order[position:], first, probed, promising, spent)
                ahead.update(batch)
                await self.bench.compile_soon(batch)
                if self.device.background_compiles and not started_later:
                    started_later = True
                    self._compile_later(order[position:], ahead)
            started = time.perf_counter()
            prepared = await prepare_candidate(self.bench, index)
            if not self.bench.was_set_aside(index):  # a twin set aside did not run
                self.sampled.order.append(index)
            if not isinstance(prepared, Arm):
                self._record(index, prepared, time.perf_counter() - started, 0)
                continue
            prepared.wall = time.perf_counter() - started
            self.alive.append(prepared)
            if not prepared.samples and not await self._sample(prepared):
                continue
            if await self._short_circuits(prepared):
                self.sampled.short_circuit = index
                return True
            await self._eliminate()
            group = self.tunables.candidates[index].group
            if group is not None:
                probed[group.name] = probed.get(group.name, 0) + 1
            if prepared in self.alive:
                if group is not None:
                    promising.add(group.name)
                self.on_trial(index, prepared.result(self.device.timing), prepared.wall)
        return False

    async def judge_screened(self) -> None:
        """Where the candidates vote on their outputs, the verdicts once screening is over (see
        the module doc): the outvoted leave the running, and those the margin dropped return to it."""
        check = self.bench.check
        if check is None or check.judge != "agreement":
            return
        verdicts = await check.judge_all()
        wrong = [arm for arm in self.alive if arm.index in verdicts]
        if not wrong:
            return
        for arm in wrong:
            self.alive.remove(arm)
            self._record(arm.index, verdicts[arm.index], arm.wall, len(arm.samples))
        back = [arm for arm in self.dropped if arm.index not in verdicts]
        self.step(f"outvoted after screening: {', '.join(arm.name for arm in wrong)}; "
                  f"{len(back)} dropped candidates sampled again")
        self.alive += back
        self.dropped = []

    async def rounds(self) -> None:
        started = time.perf_counter()
        self.bench.request.finalists([arm.index for arm in sorted(self.alive, key=self._standing)])
        rounds = 0
        while len(self.alive) > 1:
            if time.perf_counter() - started >= self.config.budget:
                self.step(f"budget of {self.config.budget}s spent with {len(self.alive)} finalists")
                break
            hungry = [arm for arm in self.alive if len(arm.samples) < self.config.max_samples]
            if not hungry:
                self.step(f"{self.config.max_samples} samples each, {len(self.alive)} finalists")
                break
            self.round += 1
            for arm in hungry:
                if await self._sample(arm, round_=self.round) and await self._short_circuits(arm):
                    self.sampled.short_circuit = arm.index
                    return
            rounds += 1
            await self._eliminate()
            self._settle()
        self.step(f"{rounds} rounds in {time.perf_counter() - started:.3f}s; {len(self.alive)} left")

    def observed(self, index: int) -> float | None:
        """What screening candidate ``index`` showed: its median so far in seconds per dispatch,
        or None when it failed (or was never run)."""
        for arm in self.alive:
            if arm.index == index:
                return median(arm.samples) if arm.samples else None
        result = self.sampled.results.get(index)
        if isinstance(result, Measured) and result.stats is not None:
            return result.stats.median
        return None

    def finish(self) -> Sampled:
        for arm in list(self.alive):
            self._settle_result(arm)
        self.alive = []
        return self.sampled


async def sample_adaptively(bench: Bench, plan: Plan, on_trial: OnTrial, limit: float | None = None) -> Sampled:
    """Run the adaptive policy over the plan's candidates (see the module doc).

    ``limit`` is the short-circuit time in seconds per dispatch, if the set gives one for the key.
    The bench's bar (the set's default) is screened first, then the plan's batches in order;
    a group may be pruned in any of them, and past the first one the screen budget applies. Every failure of a
    candidate is a value in the results; candidates never run are absent.
    """
    batches = plan.remaining()
    first = set(batches[0]) if batches else set()
    order = plan.order()
    if bench.bar in order:
        order = [bench.bar, *(index for index in order if index != bench.bar)]
        first.add(bench.bar)
    policy = AdaptiveSampler(bench, on_trial, limit)
    if not await policy.screen(order, first):
        await policy.judge_screened()
        await policy.rounds()
    return policy.finish()
