"""How sure a tune is of its winner: the runner-up's time over the winner's, round by round.

A winner is only as good as the evidence that it beats the runner-up. The statement kept with
every winner is the ratio of the runner-up's time to the winner's (above 1: the winner is
faster), an interval for it at ``level``, and ``p_faster``, how likely the winner is to be the
faster of the two. ``bench/calibration.py`` checks that statement against an oracle: over many
tunes that state ``p_faster = 0.8``, the winner should really be the faster in about 80%.

How it is computed, and why:

- **Round by round.** The adaptive policy samples its finalists round robin, and each sample
  carries its round (``Stats.rounds``): the samples of the winner and of the runner-up taken in
  the same round, moments apart, are paired (:func:`in_same_rounds`; by place where the rounds
  are not known, as in a stored result or the fixed policy's). What
  the machine did meanwhile (a clock that ramps, heat, another process taking a core for a
  while) weighs on both of them alike, and drops out of their ratio. The statement is made of the
  ratios ``log(runner_up[j] / winner[j])`` of the rounds both took, and their **median** is the
  estimate: a GPU timing's noise is one-sided and comes in bursts, and a descheduled sample must
  not move the answer. (Paired by place, the first sample of each is its screening sample, and
  the fixed policy samples one candidate after the other: those pairs are moments apart, not
  simultaneous; their ratios are as good an estimate, only noisier, unless one side took a sample
  more before the rounds: then every pair is a round off, and on a machine whose pace drifts the
  ratio reads the drift, which crowned winners that their own statement called slower, p = 0.02.)
  Comparing each side's median instead, as the
  first version did with an independent bootstrap of each side, took a change of the machine's
  pace during a tune for a difference of the candidates, and stated p = 1.0 for pairs that the
  oracle found tied.
- **The spread between rounds.** How far the median of ``n`` ratios may be off follows from how
  much the ratios vary from round to round: their median absolute deviation, scaled to a
  standard deviation (``MAD_TO_SD``), and the median's standard error ``MEDIAN_SE * sd / sqrt(n)``.
  The uncertainty of that spread itself, read off few rounds, is the Student t distribution's
  part: its degrees of freedom are what a MAD of ``n`` values is worth (``MAD_EFFICIENCY``). A
  resampling bootstrap of five or ten values (the first version's) is too narrow, and states
  certainty where a handful of samples cannot give it.
- **What one tune cannot see** (``WANDER``, ``BETWEEN_TUNES``). Repeated tunes of the same key
  disagree by more than each tune's own rounds say. The rounds of one tune share the state of
  the machine (its clocks, what else runs, which cores are free), and how two kernels compare
  depends on it: on lavapipe a one-workgroup matmul took 1.6 times a four-workgroup one's time
  with the second core free, and 0.97 times it a minute later with other work on the machine.
  A tune sees its own stretch of that wandering only, however many rounds it takes. So the
  statement adds a spread that more samples do not narrow: ``WANDER`` times the rounds' own
  spread (a machine whose rounds scatter more also wanders more from tune to tune), and a floor
  of ``BETWEEN_TUNES`` for a comparison whose rounds all agree. They add as variances; the
  degrees of freedom follow Welch and Satterthwaite (the floor is known, the rest is read off
  the rounds). A tune's own decisions (the adaptive policy's settling) leave both out: they ask
  whether more samples would help, and these parts never shrink.

The winner's curse (the winner is the best of several by the same samples) and the policy's
early stops are not corrected apart: the statement rests on the rounds' ratios, not on the
medians that chose the winner, and bench/calibration.py's keys (2 to 51 candidates, rivals
settled or dropped early) show what is left. One round each (a rival dropped at screening)
shows no spread: its ratio stands for it, which states about 0.7 whatever the gap. Ties count
half: identical samples state 0.5. Where the rounds disagree with the medians that ranked the
pair, ``p_faster`` is below 0.5, and says so. Calibration holds over a mix of keys like the
benchmark's: where many pairs are exact ties (the same code twice), the middle buckets state
more than they should, since any gap is taken to be as likely as any other.

The computation is closed-form (no resampling): the same samples always give the same statement,
and it is cheap enough to run after every round of every tune, in Pyodide too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

__all__ = ["BETWEEN_TUNES", "WANDER", "Confidence", "RatioInterval", "in_same_rounds", "median", "paired_ratio"]

# How far a comparison wanders from one tune to the next, as a share of its spread from round to
# round, and the least it is trusted to (both standard deviations of the log-ratio). Measured
# with bench/calibration.py: repeated tunes missed the oracle by 0.45 to 0.9 times the rounds'
# spread on an H200 (spreads of 0.01% to 0.7%) and by 0.4 to 1.9 times on lavapipe (2 CPU cores
# shared with other work; 1% to 4%); 0.3 to 0.7 all kept the H200's buckets within 10 points.
# A fixed floor of 1% suited lavapipe but made the H200's 0.5% gaps, which it resolves every
# time, a toss-up (stated 0.69, right 1.0); 0.1% is about where two copies of one kernel part.
WANDER = 0.5
BETWEEN_TUNES = 0.001
# A normal distribution's standard deviation over its median absolute deviation.
MAD_TO_SD = 1.4826
# The standard error of a median of n normal values is sqrt(pi / 2) * sd / sqrt(n).
MEDIAN_SE = math.sqrt(math.pi / 2)
# A MAD of n values estimates the spread about as well as the standard deviation of 0.37 n does
# (its asymptotic efficiency under the normal): the t distribution's degrees of freedom.
MAD_EFFICIENCY = 0.37
# Past these degrees of freedom the t distribution is the normal, to within 0.1% of a quantile.
NORMAL_FREEDOM = 1000.0


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(frozen=True, slots=True)
class RatioInterval:
    """``other``'s time over ``base``'s, its interval, and ``P(base faster)``."""

    ratio: float
    low: float
    high: float
    p_faster: float


# The interval bounds worth printing as numbers. One round of samples leaves one degree of freedom,
# whose interval spans many orders of magnitude (0.000 to 1166245974.129 was seen after a screen):
# past these it says no more than "unbounded", and reads so.
SHOWN_BOUNDS = (1e-3, 1e3)


def shown_bound(value: float) -> str:
    """An interval bound as people read it: three decimals, or ``<0.001`` / ``>1000`` past
    :data:`SHOWN_BOUNDS` (``web/format.js`` shows them alike)."""
    if value < SHOWN_BOUNDS[0]:
        return "<0.001"
    if value > SHOWN_BOUNDS[1]:
        return ">1000"
    return f"{value:.3f}"


def shown_interval(low: float, high: float) -> str:
    """An interval as people read it: ``[1.100, 1.310]`` (bounds by :func:`shown_bound`), or
    ``[unbounded]`` where both bounds are past :data:`SHOWN_BOUNDS` (too few rounds to bound the
    ratio either way: ``[<0.001, >1000]`` would say the same in more digits)."""
    if low < SHOWN_BOUNDS[0] and high > SHOWN_BOUNDS[1]:
        return "[unbounded]"
    return f"[{shown_bound(low)}, {shown_bound(high)}]"


def in_same_rounds(
    base: Sequence[float], base_rounds: Sequence[int], other: Sequence[float], other_rounds: Sequence[int]
) -> tuple[list[float], list[float]]:
    """The samples of ``base`` and ``other`` taken in the same rounds, in round order, where each
    sample's round is known (``Stats.rounds``) and they share two rounds or more; else both as
    they are, paired by index. Index by index is round by round only where both took every
    sample in the same rounds: a candidate sampled once more at screening (a single losing
    sample), or with an invalid sample dropped, would be paired a round off from then on, and on
    a machine whose pace drifts the ratio reads the drift."""
    if len(base_rounds) == len(base) and len(other_rounds) == len(other):
        at = {stamp: value for stamp, value in zip(other_rounds, other, strict=True) if stamp > 0}
        shared = [(stamp, value) for stamp, value in zip(base_rounds, base, strict=True) if stamp in at]
        if len(shared) >= 2:
            shared.sort()
            return [value for _, value in shared], [at[stamp] for stamp, _ in shared]
    return list(base), list(other)


def paired_ratio(
    base: Sequence[float], other: Sequence[float], level: float = 0.95, *, across_tunes: bool = False
) -> RatioInterval:
    """``other``'s time over ``base``'s from the samples they took in the same rounds (index by
    index, as many as both have), with an interval at ``level`` and the probability that
    ``base`` is the faster (see the module doc).

    ``across_tunes``: also what varies from one tune to the next (``WANDER``, ``BETWEEN_TUNES``),
    for the statement kept with a winner; without it, the rounds' spread only, which more samples
    narrow, for a tune's own decisions.
    """
    if not base or not other:
        raise ValueError("paired_ratio needs samples on both sides")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    logs = [math.log(o / b) for b, o in zip(base, other, strict=False)]
    rounds = len(logs)
    center = median(logs)
    # One round shows no spread: its own ratio stands for it, since one pair of samples cannot
    # tell a difference from noise (about 0.7, whatever the gap; the adaptive policy ends a tune
    # so when a rival's one sample was over twice the winner's, which a busy machine can fake).
    spread = MAD_TO_SD * median([abs(value - center) for value in logs]) if rounds > 1 else abs(center)
    read_off_rounds = (MEDIAN_SE * spread) ** 2 / rounds + (WANDER * spread if across_tunes else 0.0) ** 2
    variance = read_off_rounds + (BETWEEN_TUNES**2 if across_tunes else 0.0)
    if variance == 0:  # every round gave the same ratio, and nothing else is in doubt
        p_faster = 1.0 if center > 0 else 0.0 if center < 0 else 0.5
        return RatioInterval(math.exp(center), math.exp(center), math.exp(center), p_faster)
    freedom = NORMAL_FREEDOM
    if read_off_rounds > 0:  # Welch-Satterthwaite: the floor is known, the rest estimated from `spread`
        spread_freedom = max(1.0, MAD_EFFICIENCY * (rounds - 1))
        freedom = min(NORMAL_FREEDOM, spread_freedom * (variance / read_off_rounds) ** 2)
    scale = math.sqrt(variance)
    half = _t_quantile((1 + level) / 2, freedom) * scale
    return RatioInterval(
        math.exp(center), math.exp(center - half), math.exp(center + half), _t_cdf(center / scale, freedom)
    )


def _t_cdf(t: float, freedom: float) -> float:
    """Student's t distribution's CDF at ``t`` (``freedom`` >= 1; the normal's past NORMAL_FREEDOM)."""
    if freedom >= NORMAL_FREEDOM:
        return NormalDist().cdf(t)
    tail = 0.5 * _incomplete_beta(freedom / 2, 0.5, freedom / (freedom + t * t))
    return 1 - tail if t > 0 else tail


@functools.lru_cache(maxsize=256)
def _t_quantile(q: float, freedom: float) -> float:
    """The ``q`` quantile (q > 0.5) of Student's t, by bisection of the CDF. Cached: a tune asks
    for the same few (its level, its rounds) after every round."""
    if freedom >= NORMAL_FREEDOM:
        return NormalDist().inv_cdf(q)
    low, high = 0.0, math.tan(math.pi * (q - 0.5))  # the Cauchy's (1 degree) quantile bounds the rest
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf(middle, freedom) < q else (low, middle)
    return (low + high) / 2


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on this side only
        return 1 - _incomplete_beta(b, a, 1 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1) < 1e-14:
            break
    return front * fraction / a


@dataclass(frozen=True, slots=True)
class Confidence:
    """How sure a tune is that its winner beats the runner-up (the best of the rest by median).

    ``ratio`` is the runner-up's time over the winner's, the median of their ratios round by
    round; ``low``..``high`` its interval at ``level``; ``p_faster`` the probability that the
    winner is the faster, all with what varies between tunes included (``paired_ratio``'s
    ``across_tunes``).
    ``samples`` are how many samples each side had (the rounds compared: the fewer of the two).
    """

    runner_up: str
    ratio: float
    low: float
    high: float
    level: float
    p_faster: float
    samples: tuple[int, int]

    @classmethod
    def between(
        cls, winner: Sequence[float], runner_up_name: str, runner_up: Sequence[float], level: float
    ) -> Confidence:
        interval = paired_ratio(winner, runner_up, level, across_tunes=True)
        return cls(
            runner_up_name, interval.ratio, interval.low, interval.high, level, interval.p_faster,
            (len(winner), len(runner_up)),
        )

    def short(self) -> str:
        """For a table cell: ``1.23x [1.10, 1.31] p=0.99`` (the runner-up's time over the winner's,
        its interval, the probability that the winner is the faster). Bounds past
        :data:`SHOWN_BOUNDS` read ``<0.001`` or ``>1000``, an interval past both ``[unbounded]``."""
        return f"{self.ratio:.3f}x {shown_interval(self.low, self.high)} p={self.p_faster:.2f}"

    def describe(self) -> str:
        """One line for people: ``1.23x vs B, 95% interval [1.10, 1.31], P(winner faster)=0.99``."""
        return (
            f"{self.ratio:.3f}x vs {self.runner_up}, {self.level:.0%} interval "
            f"{shown_interval(self.low, self.high)}, "
            f"P(winner faster)={self.p_faster:.2f} ({self.samples[0]} and {self.samples[1]} samples)"
        )

    def to_json(self) -> dict:
        return {
            "runner_up": self.runner_up,
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "level": self.level,
            "p_faster": self.p_faster,
            "samples": list(self.samples),
        }

    @classmethod
    def from_json(cls, obj: object) -> Confidence:
        """Decode :meth:`to_json`; raises ValueError naming what is wrong."""
        if not isinstance(obj, dict):
            raise ValueError(f"confidence must be an object, got {type(obj).__name__}")
        try:
            samples = obj.get("samples", [0, 0])
            read = cls(
                str(obj["runner_up"]),
                float(obj["ratio"]),
                float(obj["low"]),
                float(obj["high"]),
                float(obj["level"]),
                float(obj["p_faster"]),
                (int(samples[0]), int(samples[1])),
            )
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ValueError(f"not a confidence: {type(error).__name__}: {error}") from None
        # What a tune states, and nothing else: a probability, a level, ratios (a bound may be 0 or
        # unbounded); a p_faster of 1e308 would win every merge of bundles (the higher one wins).
        problems = [what for what, bad in (
            (f"p_faster {read.p_faster} is no probability (0 to 1)", not 0.0 <= read.p_faster <= 1.0),
            (f"level {read.level} is no probability (between 0 and 1)", not 0.0 < read.level < 1.0),
            (f"ratio {read.ratio} is no positive number", not (math.isfinite(read.ratio) and read.ratio > 0)),
            (f"interval [{read.low}, {read.high}] is no interval of ratios", not 0.0 <= read.low <= read.high),
            (f"samples {read.samples} are no counts", min(read.samples) < 0),
        ) if bad]
        if problems:
            raise ValueError(f"not a confidence a tune states: {'; '.join(problems)}")
        return read
