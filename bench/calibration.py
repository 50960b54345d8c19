"""Is a tune's stated confidence calibrated? Fresh tunes of many keys, scored against an oracle.

Every tune states ``p_faster``, how likely its winner is to be faster than its runner-up
(``wgtune.store.confidence``). A statement "p = 0.8" is calibrated when, over many tunes that state
0.8, the winner really is the faster in 80 of 100. This benchmark checks it on the adapter in
hand:

- **keys** with clear winners, close ones (about 1-3% apart) and ties: synthetic ``spin`` sets,
  whose candidates run the same dependent ``fma`` loop with loop counts baked in (so the gaps are
  engineered: 1% more iterations, 1% more time, give or take the dispatch's fixed cost; equal
  counts are true ties, the same code under another name), and keys of the real families
  (``fma``, row reductions, a small matmul), whose near-ties are whatever the device makes of them;
- per key, ``--tunes`` **fresh tunes** (a fresh ``Tuner``, cache off, the settings from the
  environment as in ``bench/regret.py``), each stating a winner, a runner-up and ``p_faster``;
- the **oracle** (``bench/regret.py``'s: every candidate sampled round robin, each sample at
  least 2 ms long) runs in blocks of ``--rounds`` rounds, one block before the first tune and
  one after each, so that its samples span the same stretch of time as the tunes and drift
  (clocks, heat, the other work of the machine) weighs on both alike. Each block starts its
  rounds at another candidate (in a fixed order, lavapipe put the second of two identical
  kernels 0.2% ahead). Two candidates compare by the median of their ratios round by
  round (a change of the machine's pace between rounds, another process taking a core for a
  while, cancels out; comparing each one's median did not, on a shared 2-core machine whose
  pace halved for seconds at a time). In sets of more than ``SCREENED`` candidates, a first
  block screens them: those over ``PRESCREEN`` times the best's median are left out of the
  later blocks (they lost by far; any pair with one is judged on that first block).

**What "really faster" means, and ties.** The blocks alternate between two halves (even and odd
blocks), two oracles interleaved over the same time. A tune's statement is judged against
both: when both halves put the stated winner ahead of the stated runner-up, it was right (1);
when both put it behind, wrong (0); when the halves disagree, the two are a tie at the oracle's
resolution, and the statement counts 0.5; so does a pair within ``TIE`` (0.1%) of each other.
Why half: a candidate that the oracle itself cannot tell from its rival, with many times a
tune's samples, is as likely ahead as behind; "the winner is faster" is then a coin's toss, and
a calibrated statistic should say 0.5 for it, no more. Counting such pairs as right would reward
any confidence, counting them wrong would punish any, and leaving them out would hide exactly
the keys where overconfidence lives (the issue's fma near-ties). A true tie still has halves
that agree half the time, by chance; its verdict is then a coin's toss too, so it also averages
0.5. The ``ties`` column counts the pairs judged 0.5; the per-key lines give the oracle's ratios
to its best, and per key how many winners the tunes picked, what they stated on average and how
often they were right.

On a CPU adapter shared with other work, which of two kernels is faster can change with the
load (one that uses fewer cores gains when another process takes one), so a tune is judged by
an oracle spread over the same minutes, not by one measured apart; the real families' table
shows what is left of that. The synthetic keys all use the cores alike.

Printed per bucket of stated probability: tunes, ties, mean stated, observed frequency (the
mean of the verdicts), their difference in points and the observed frequency's standard error
(a bucket of 30 tunes at 0.8 is only known to about +-7 points). Target (issue 14): every
bucket within 10 points. A benchmark, not a test.

``--save FILE`` writes every tune's measured samples and the oracle's blocks as JSON;
``--replay FILE`` scores those same tunes again with the statistic as the code now states it,
without a device (the sampling is as it was: a tune whose policy stops on the statistic
(``adaptive.py``'s settling) would have sampled differently).

Usage: ``python bench/calibration.py`` (lavapipe: 2 to 4 minutes on 2 cores), ``--full`` (GPU
sizes and 60 tunes a key: about 3 minutes on an H200), ``--only spin`` (one family),
``--replay FILE``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from regret import candidates_of, fresh_tune, oracle  # bench/regret.py: the same oracle and tunes

import wgtune
from kernels import Workload, fma_workload, matmul_workload, reduction_workload  # bench/kernels.py
from wgtune import Config, Measured, Stats, clock_grain, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.tune.ranking import winner_confidence

TUNES = 30
ROUNDS = 6  # oracle rounds per block: a block after each tune
FULL_TUNES = 60
# In sets of over SCREENED candidates, those over PRESCREEN times the best in the first block
# leave the oracle (the adaptive policy drops one as hopeless on one sample at twice the leader).
SCREENED = 8
PRESCREEN = 2.0
# Two candidates within 0.1% of each other are a tie, whatever the oracle's halves say: an H200
# resolves 0.01% between two copies of one kernel, the same way in both halves, and no tune (nor
# anyone) can use that; it is also the least difference confidence.py trusts between tunes.
TIE = 0.001
BUCKETS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0 + 1e-9)

SPIN = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
// NAME
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= n.x) { return; }
    var v = x[id.x];
    for (var i = 0u; i < LOOPSu; i++) { v = fma(v, 0.9999, 0.5); }
    y[id.x] = v;
}"""


def spin_workload(label: str, loops: list[int], n: int) -> Workload:
    """A synthetic set: one candidate per loop count (equal counts are the same code, renamed),
    each invocation running that many dependent ``fma``; time grows with the count."""
    candidates = [
        wgtune.Kernel(f"spin{i}_{count}", SPIN.replace("LOOPS", str(count)).replace("NAME", f"spin{i}"),
                      grid=lambda args: (-(-args.params[0] // 64), 1, 1))
        for i, count in enumerate(loops)
    ]
    tunables = wgtune.TunableSet(f"spin_{label}", candidates, key=lambda args: {"n": args.params[0]})

    def make(device: NativeDevice) -> tuple[wgtune.Args, dict]:
        x = device.create_buffer(struct.pack(f"{n}f", *(i % 97 / 97 for i in range(n))))
        return wgtune.Args((x, device.create_buffer(size=4 * n)), (n,)), {}

    return Workload("spin", label, tunables, make, 0.0, "s", lambda out, inputs: 0.0)


def spin_keys(full: bool) -> list[Workload]:
    """Ties (2 and 4 alike), gaps of 1, 2 and 3%, a ladder of small gaps, and clear winners.
    The fastest is never candidate 0 alone: ties go to the lower index."""
    n, base = (1 << 21, 4000) if full else (1 << 14, 400)

    def counts(*shares: float) -> list[int]:
        return [round(base * share) for share in shares]

    return [
        spin_workload("tie2", counts(1, 1), n),
        spin_workload("tie4", counts(1, 1, 1, 1), n),
        spin_workload("gap1", counts(1.01, 1), n),
        spin_workload("gap2", counts(1.02, 1, 1.04), n),
        spin_workload("gap3", counts(1.03, 1), n),
        spin_workload("ladder", counts(1.02, 1.005, 1, 1.01, 1.05), n),
        spin_workload("clear", counts(1.1, 1, 1.3), n),
    ]


def real_keys(full: bool) -> list[Workload]:
    if full:
        found = [fma_workload(1 << 26), fma_workload(1 << 22), reduction_workload("sum", 1 << 14, 1 << 12),
                 reduction_workload("max", 3000, 3001), matmul_workload(1024, 1024, 1024)]
    else:
        found = [fma_workload(1 << 20), fma_workload(1 << 16), reduction_workload("sum", 1024, 1024),
                 reduction_workload("max", 333, 777), matmul_workload(128, 128, 128)]
    return [w for w in found if w is not None]


# -- the oracle ------------------------------------------------------------------------------------


@dataclass
class Oracle:
    """The oracle's blocks for one key: per candidate, one list of samples per block."""

    names: list[str]
    screen: dict[int, float] = field(default_factory=dict)  # the first block's medians, every candidate
    blocks: list[dict[int, list[float]]] = field(default_factory=list)

    def measure(self, device: NativeDevice, pipelines: dict[int, tuple], args: Any, rounds: int) -> None:
        """One more block: the screened candidates round robin (all of them, the first time)."""
        if not self.screen:
            first = oracle(device, pipelines, args, rounds)
            self.screen = {i: statistics.median(values) for i, values in first.items()}
            best = min(self.screen.values())
            hopeless = {i for i in first if len(first) > SCREENED and self.screen[i] > PRESCREEN * best}
            self.blocks.append({i: v for i, v in first.items() if i not in hopeless})
            return
        # Each block starts its rounds at another candidate (every order in both halves): the
        # one sampled second in a round can be helped by the first (on lavapipe the second of
        # two identical kernels reads ~0.2% faster), and a fixed order would make that a verdict.
        order = list(self.blocks[0])
        turn = len(self.blocks) // 2 % len(order)
        self.blocks.append(oracle(device, {i: pipelines[i] for i in order[turn:] + order[:turn]}, args, rounds))

    def ratio(self, a: int, b: int, parity: int | None = None) -> float:
        """``b``'s time over ``a``'s: the median of their ratios round by round (in the blocks of
        one half, or all), so that a change of the machine's pace between rounds cancels out;
        from the first block's medians for a candidate left out after it."""
        if a not in self.blocks[0] or b not in self.blocks[0]:
            return self.screen[b] / self.screen[a]
        blocks = self.blocks if parity is None else self.blocks[parity::2]
        return math.exp(statistics.median(
            math.log(y / x) for block in blocks for x, y in zip(block[a], block[b], strict=True)))

    def verdict(self, winner: int, runner_up: int) -> float:
        """1 when both halves put ``winner`` ahead, 0 when both put it behind, 0.5 for a tie (the
        halves disagree, or the two are within ``TIE``)."""
        if abs(math.log(self.ratio(winner, runner_up))) < TIE:
            return 0.5
        ahead = [self.ratio(winner, runner_up, parity) > 1 for parity in (0, 1)]
        return 1.0 if all(ahead) else 0.0 if not any(ahead) else 0.5

    def to_json(self) -> dict:
        return {"names": self.names, "screen": self.screen, "blocks": self.blocks}

    @classmethod
    def from_json(cls, obj: dict) -> Oracle:
        blocks = [{int(i): values for i, values in block.items()} for block in obj["blocks"]]
        return cls(obj["names"], {int(i): t for i, t in obj["screen"].items()}, blocks)


# -- tunes -----------------------------------------------------------------------------------------


@dataclass
class Tune:
    """What one tune measured (its candidates' samples, ranked) and what it stated."""

    order: list[int]
    samples: dict[int, list[float]]
    early: list[int]  # candidates eliminated early
    stated: dict | None  # Confidence.to_json()
    wall: float  # seconds the tune took

    @classmethod
    def of(cls, outcome: wgtune.TuneOutcome) -> Tune:
        measured = [r for r in outcome.results if isinstance(r, Measured) and r.stats is not None]
        return cls(list(outcome.order), {r.index: list(r.stats.samples) for r in measured},
                   [r.index for r in measured if r.eliminated_early],
                   outcome.confidence.to_json() if outcome.confidence is not None else None, outcome.wall)

    def restated(self, names: list[str], level: float) -> tuple[int, int, float] | None:
        """(winner, runner-up, p_faster) as the code now states it from the same samples."""
        results: list[Any] = [wgtune.Skip(name) for name in names]
        for index, values in self.samples.items():
            results[index] = Measured(names[index], index, Stats(tuple(values), "replay"), index in self.early)
        sure = winner_confidence(results, self.order, level)
        if sure is None:
            return None
        return self.order[0], names.index(sure.runner_up), sure.p_faster


@dataclass
class KeyRun:
    label: str
    oracle: Oracle
    tunes: list[Tune]
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"label": self.label, "oracle": self.oracle.to_json(), "seconds": self.seconds,
                "tunes": [vars(t) for t in self.tunes]}

    @classmethod
    def from_json(cls, obj: dict) -> KeyRun:
        tunes = [Tune(t["order"], {int(i): v for i, v in t["samples"].items()}, t["early"], t["stated"], t["wall"])
                 for t in obj["tunes"]]
        return cls(obj["label"], Oracle.from_json(obj["oracle"]), tunes, obj["seconds"])


def run_key(device: NativeDevice, workload: Workload, tunes: int, rounds: int) -> KeyRun:
    args, _ = workload.make(device)
    pipelines = candidates_of(device, workload, args)
    names = [kernel.name for kernel in workload.tunables.candidates]
    run = KeyRun(f"{workload.family} {workload.label}", Oracle(names), [])
    started = time.perf_counter()
    run.oracle.measure(device, pipelines, args, rounds)
    for _ in range(tunes):
        _, outcome = fresh_tune(device, workload, args, pipelines, "adaptive")
        if outcome is not None:
            run.tunes.append(Tune.of(outcome))
        run.oracle.measure(device, pipelines, args, rounds)
    run.seconds = time.perf_counter() - started
    return run


# -- scoring ---------------------------------------------------------------------------------------


def scored(run: KeyRun, level: float) -> list[tuple[float, float]]:
    """(stated p_faster, verdict) per tune of ``run``, as the code now states it."""
    found = []
    for tune in run.tunes:
        statement = tune.restated(run.oracle.names, level)
        if statement is not None:
            winner, runner_up, p = statement
            found.append((p, run.oracle.verdict(winner, runner_up)))
    return found


def key_line(run: KeyRun, level: float) -> str:
    oracle_ = run.oracle
    first = min(oracle_.screen, key=oracle_.screen.get)
    best = min(oracle_.blocks[0], key=lambda i: oracle_.ratio(first, i))
    ranked = sorted(oracle_.blocks[0], key=lambda i: oracle_.ratio(best, i))
    top = ", ".join(f"{oracle_.names[i]} {oracle_.ratio(best, i):.3f}" for i in ranked[:4])
    pairs = scored(run, level)
    winners = {tune.order[0] for tune in run.tunes}
    mean = lambda values: sum(values) / len(values) if values else math.nan  # noqa: E731
    return (f"{run.label}: oracle {oracle_.screen[best] * 1e6:.1f} us [{top}]; {len(run.tunes)} tunes, "
            f"{len(winners)} winners, "
            f"stated {mean([p for p, _ in pairs]):.2f}, right {mean([v for _, v in pairs]):.2f}, "
            f"ties {sum(v == 0.5 for _, v in pairs)}; a tune {mean([t.wall for t in run.tunes]):.2f}s, "
            f"{run.seconds:.0f}s in all")


def table(pairs: list[tuple[float, float]]) -> bool:
    """Print the per-bucket table; True when every bucket is within 10 points."""
    print(f"{'stated p':>11} {'tunes':>6} {'ties':>5} {'mean stated':>12} {'observed':>9} {'diff':>7} {'+-se':>6}")
    within = True
    for low, high in itertools.pairwise(BUCKETS):
        inside = [(p, v) for p, v in pairs if low <= p < high]
        if not inside:
            continue
        stated = sum(p for p, _ in inside) / len(inside)
        observed = sum(v for _, v in inside) / len(inside)
        se = math.sqrt(max(observed * (1 - observed), 0.25 / len(inside)) / len(inside))
        within = within and abs(observed - stated) <= 0.10
        name = f">={low:.2f}" if high > 1 else f"{low:.2f}-{high:.2f}"
        print(f"{name:>11} {len(inside):>6} {sum(v == 0.5 for _, v in inside):>5} {stated:>12.3f} "
              f"{observed:>9.3f} {100 * (observed - stated):>+6.1f}p {100 * se:>5.1f}p")
    brier = sum((p - v) ** 2 for p, v in pairs) / len(pairs)
    print(f"{len(pairs)} tunes; Brier score {brier:.4f}; every bucket within 10 points: {'yes' if within else 'NO'}")
    return within


def report(runs: list[KeyRun], level: float) -> None:
    print(f"\nper bucket of stated p_faster ({sum(len(r.tunes) for r in runs)} tunes, {len(runs)} keys):")
    table([pair for run in runs for pair in scored(run, level)])
    spin = [pair for run in runs if run.label.startswith("spin") for pair in scored(run, level)]
    real = [pair for run in runs if not run.label.startswith("spin") for pair in scored(run, level)]
    for what, pairs in (("synthetic (spin) keys only", spin), ("real families only", real)):
        if pairs and len(pairs) < sum(len(r.tunes) for r in runs):
            print(f"\n{what}:")
            table(pairs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="GPU sizes and more tunes per key")
    parser.add_argument("--only", action="append", help="only this family (spin, fma, matmul, row_sum, row_max)")
    parser.add_argument("--tunes", type=int, help=f"fresh tunes per key (default {TUNES}, {FULL_TUNES} with --full)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="oracle rounds per block (one block per tune)")
    parser.add_argument("--save", type=Path, help="write every tune's samples and the oracle's blocks here (JSON)")
    parser.add_argument("--replay", type=Path, help="score the tunes saved in this file again, without a device")
    options = parser.parse_args(argv)
    level = Config.from_env().confidence
    if options.replay:
        runs = [KeyRun.from_json(obj) for obj in json.loads(options.replay.read_text())["keys"]]
        for run in runs:
            print(key_line(run, level))
        report(runs, level)
        return 0
    tunes = options.tunes or (FULL_TUNES if options.full else TUNES)
    if tunes < 1 or options.rounds < 2:
        parser.error("--tunes must be >= 1 and --rounds >= 2")
    device = NativeDevice.open()
    grain = run_inline(clock_grain(device))
    print(f"adapter: {device.adapter_info.get('device', '?')}, timing {device.timing}, clock grain "
          f"{grain * 1e6:.2f} us; {tunes} tunes a key, oracle blocks of {options.rounds} rounds", flush=True)
    runs = []
    for workload in [*spin_keys(options.full), *real_keys(options.full)]:
        if options.only and workload.family not in options.only:
            continue
        runs.append(run_key(device, workload, tunes, options.rounds))
        print(key_line(runs[-1], level), flush=True)
        if options.save:  # after every key: a long run stopped midway keeps what it measured
            options.save.write_text(json.dumps({"keys": [run.to_json() for run in runs]}))
    report(runs, level)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
