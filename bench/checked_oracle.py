"""The oracle of ``bench/shapes.py``: every candidate that fits, its output checked, then sampled.

``bench/regret.py``'s oracle times every candidate that fits the device and the key. Off the
shapes the kernels were written for, a candidate may be fast because it is wrong (a tile that
drops the tail of an odd K, say), so this oracle first runs each candidate once and compares its
output with the exact one (``Workload.expected``: float64 from numpy, or torch on a CUDA GPU)
within the set's tolerance (``TunableSet.tolerances_for`` the call: ``atol + rtol * |exact|``, the core's rule
in ``checks.compare``). Each runs on an output buffer filled with NaN, so a candidate that leaves
the output alone cannot pass on the result of the one before it. A candidate that disagrees, or
fails to run, is marked wrong with the reason and excluded; the others are sampled by
``regret.oracle`` (interleaved rounds, each sample long against the clock), and the best of them
is the oracle's winner.

The noise of the oracle: its rounds are split in two (even and odd), and a pick's regret is
computed against each half's medians; the difference between the two is printed. It measures
half as many rounds as the oracle has, so it overstates the full oracle's noise (by about
``sqrt(2)``).

A regret over the limit is then put to a duel (:func:`duel`): the pick and the oracle's winner
alone, interleaved over :data:`DUEL_ROUNDS` rounds, four times the oracle's. The oracle's winner
is the least of some forty noisy medians, so its time is biased low (the winner's curse) and
every pick's regret high by as much; measured again, apart from the draw that made it the
winner, the pair's ratio is the regret without that bias and with half the noise.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from regret import candidates_of, medians, oracle  # bench/regret.py

from kernels import Workload  # bench/kernels.py
from wgtune import Args, run_inline
from wgtune.backends.native import NativeDevice

__all__ = ["DUEL_COPIES", "DUEL_ROUNDS", "CheckedOracle", "allowance", "checked_candidates", "checked_oracle",
           "disagreement", "duel"]

DUEL_ROUNDS = 40  # the rounds of a duel between a pick and the oracle's winner
DUEL_COPIES = 2  # the sets of copies a spread duel adds to the call's buffers


def allowance(want: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """How far each value may be off the exact ``want``: ``atol + rtol * |want|``; NaN where
    ``want`` is not finite (an infinity or a NaN agrees only with itself). Made once a shape."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(want), atol + rtol * np.abs(want), np.nan)


def disagreement(got: np.ndarray, want: np.ndarray, allowed: np.ndarray) -> str | None:
    """Why ``got`` is not ``want`` within ``allowed`` (:func:`allowance`), or None. Values
    outside it agree only if equal, or both NaN (as the core's output checks compare)."""
    if got.shape != want.shape:
        return f"{got.size} values, {want.size} expected"
    ours = got.astype(np.float64)
    with np.errstate(invalid="ignore"):
        off = np.flatnonzero(~(np.abs(ours - want) <= allowed))
    if not off.size:
        return None
    mine, exact = ours[off], want[off]
    bad = off[~((mine == exact) | (np.isnan(mine) & np.isnan(exact)))]
    if not bad.size:
        return None
    first = int(bad[0])
    return f"{bad.size} of {want.size} values off; first [{first}]: {ours[first]:.6g}, exact {want[first]:.6g}"


def closeness(got: np.ndarray, want: np.ndarray, allowed: np.ndarray) -> float:
    """How near a right ``got`` came to the allowance: the largest ``|got - want| / allowed`` over
    the values compared within it (0 for an exact answer, up to 1). Near 1, a right candidate
    sits on the tolerance's edge on this device: the tolerance is too tight for its rounding."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.abs(got.astype(np.float64) - want) / allowed
    finite = ratio[np.isfinite(ratio)]
    return float(finite.max()) if finite.size else 0.0


@dataclass
class CheckedOracle:
    """What the oracle found on one call: which candidates fit, which were right, how fast."""

    fitting: int  # candidates that fit the device and the key, compiled and ran
    wrong: dict[int, str]  # index -> why its output is not the exact one (or why it failed to run)
    samples: dict[int, list[float]]  # each correct candidate's samples, seconds per dispatch
    pipelines: dict[int, tuple] = field(default_factory=dict)  # each correct one's (pipeline, grid)

    @property
    def times(self) -> dict[int, float]:
        """Each correct candidate's true time: the median of its samples."""
        return medians(self.samples)

    @property
    def best(self) -> int | None:
        times = self.times
        return min(times, key=times.get) if times else None

    def regret(self, pick: int) -> float:
        """``pick``'s true time over the oracle winner's, minus one; infinite if ``pick`` is
        wrong or did not run."""
        return _regret(self.times, pick)

    def noise(self, pick: int) -> float:
        """How far ``pick``'s regret moves between the even and the odd rounds (0 if either
        half has no samples or ``pick`` is not among the correct ones)."""
        if pick not in self.samples or min(len(values) for values in self.samples.values()) < 2:
            return 0.0
        halves = [medians({index: values[start::2] for index, values in self.samples.items()}) for start in (0, 1)]
        return abs(_regret(halves[0], pick) - _regret(halves[1], pick))


def _regret(times: dict[int, float], pick: int) -> float:
    if pick not in times:
        return float("inf")
    return times[pick] / min(times.values()) - 1


def checked_candidates(
    device: NativeDevice, workload: Workload, args: Args, want: np.ndarray, compiled: dict[str, Any]
) -> tuple[dict[int, tuple], dict[int, str]]:
    """Every candidate of ``workload``'s set that fits the device and this call's key (compiled
    once per fingerprint through ``compiled``) as ``{index: (pipeline, grid)}``, and the wrong ones
    among them: ``{index: why}``, each one's output checked against ``want`` on an output buffer
    filled with NaN."""
    pipelines = candidates_of(device, workload, args, compiled)
    _typecode, atol, rtol = workload.tunables.tolerances_for(args)[0]
    allowed = allowance(want, atol, rtol)
    out = workload.out_index
    poison = device.create_buffer(b"\xff" * args.buffers[out].size)  # all bits set: NaN in f32 and f16
    wrong: dict[int, str] = {}
    for index, (pipeline, grid) in pipelines.items():
        output = device.clone_buffer(poison)
        call = args.with_buffers([output if slot == out else buffer for slot, buffer in enumerate(args.buffers)])
        try:
            device.dispatch(pipeline, call, grid)
            got = workload.output(run_inline(device.read_buffer(output)), want.size)
        except Exception as error:  # a candidate that fails here is no one's pick
            wrong[index] = f"did not run: {error}"
            continue
        finally:
            output.destroy()
        problem = disagreement(got, want, allowed)
        if problem:
            wrong[index] = problem
    poison.destroy()
    return pipelines, wrong


def checked_oracle(
    device: NativeDevice, workload: Workload, args: Args, want: np.ndarray, rounds: int, compiled: dict[str, Any]
) -> CheckedOracle:
    """Every candidate of ``workload``'s set that fits the device and this call's key
    (:func:`checked_candidates`), each one's output checked against ``want``; the correct ones
    sampled over ``rounds`` interleaved rounds."""
    pipelines, wrong = checked_candidates(device, workload, args, want, compiled)
    correct = {index: found for index, found in pipelines.items() if index not in wrong}
    samples = oracle(device, correct, args, rounds) if correct else {}
    return CheckedOracle(len(pipelines), wrong, samples, correct)


def duel(device: NativeDevice, found: CheckedOracle, pick: int, args: Args, rounds: int = DUEL_ROUNDS,
         copies: int = 0) -> float | None:
    """``pick``'s regret measured again against the oracle's winner alone (see the module doc):
    their medians over ``rounds`` interleaved rounds, the pick's over the winner's, minus one
    (below zero where the pick proves the faster). None where there is no one to duel: the pick
    is the winner, or is not among the correct candidates.

    With ``copies``, the pair is timed so on the call's buffers and on that many sets of copies
    of them, and a candidate's time is the mean of its medians on each set: where a kernel's
    speed depends on where its buffers lie (``bench/placement.py``), the call's own buffers are
    one draw of that, and a tune (which runs on copies) can only pick for buffers nobody chose."""
    best = found.best
    if best is None or pick == best or pick not in found.pipelines:
        return None
    pair = {index: found.pipelines[index] for index in (pick, best)}
    sets = [args] + [args.with_buffers([device.clone_buffer(buffer) for buffer in args.buffers])
                     for _ in range(copies)]
    each = [medians(oracle(device, pair, one, rounds)) for one in sets]
    for one in sets[1:]:
        for buffer in one.buffers:
            buffer.destroy()
    return sum(times[pick] for times in each) / sum(times[best] for times in each) - 1
