"""Every candidate of the kernel families on shapes off the headline, each checked and timed,
beside torch: what the sets' groups and priorities are drawn from.

For each shape: the key, its class (matmul) or regime (reductions), torch's figure (CUDA
events, as ``bench/kernels.py`` times it), then each candidate the key's plan does not skip
(``--every``: also those of groups the key's class skips; ``--first-batch``: only the plan's
first batch): compiled, timed once (one over 10
times the best so far twice running is ``slow`` and not sampled), its output checked against a float64
reference (the set's tolerance), then timed with the device's timestamps (samples of at least
``--min-sample`` seconds, the median of ``--samples``). Printed per shape: torch, the best
candidate, and the best of the plan's first batch (where a tune starts) with their ratios to
torch; at the end each family's median and minimum of the best's ratio. The best is what a
tune should pick (the adaptive policy screens every batch the plan does not skip);
``bench/shapes.py`` measures the tune itself. ``--out DIR`` also writes every candidate's
figure (``probe.jsonl``).

Usage::

    python bench/kernel_probe.py                    # small shapes, minutes on lavapipe
    python bench/kernel_probe.py --full             # the H200 shapes (issue 14's classes)
    python bench/kernel_probe.py --only matmul --shapes 0:4 --out /tmp/probe
    python bench/kernel_probe.py --full --only matmul --shape 64x64x65536 \
        --tiles "T(32, 32, 16, 4, 4, vec4=True, kgrid=1024, stagger=8)" --tiles "R(1, 32, vec4=True, split=512)"

``--tiles`` (repeatable) probes tiles that are not in the set yet: each a Python expression
giving a tile or a tuple of tiles, with ``T`` (MatmulTile), ``R`` and ``C`` (skinny tiles of rows
or columns), ``F`` (flat tiles for a short K: ``F(rows, cols, wx, wy, vec4=False, unroll=4)``),
as in ``kernels/matmul/tiles.py``, and ``replace`` at hand, or ``@FILE``: one such expression
a line (``#`` starts a comment); the set probed is then those
tiles, ungrouped, after the naive kernel (every one planned where its vec4 loads can serve).
``--shape MxNxK`` (repeatable) probes those matmul shapes instead of the lists'. ``--each`` also
prints a line per candidate probed (its status, rate and ratio to torch, and ``wg`` the workgroups
of each of its stages, ``+`` between them: how many blocks, chunks and waves it ran) after each
shape's line, and at the end, over two or more shapes, each candidate's standing: the shapes it
led, and the median and least of its rate over each shape's best.

Flat matmuls (issue 29: a short K, many outputs; the set plans its ``flat*`` candidates first
where K <= 64 on medium and large keys)::

    python bench/kernel_probe.py --full --only matmul --each --shape 4561x4475x11 --shape 620x7790x37 \
        --shape 901x7895x6 --shape 3957x990x22 --shape 1754x2317x11 --shape 3185x1464x17 \
        --shape 864x734x31 --shape 2455x849x15 --shape 1055x623x18 --shape 537x2233x7
    python bench/kernel_probe.py --only matmul --each --shape 4561x4475x11 --tiles "F(8, 8, 32, 8)"
``--runtime-checks on|off`` compiles every candidate with or without WebGPU's runtime checks
(``Kernel.runtime_checks``; by default each as its set says); ``bench/runtime_checks.py`` times
both ways in one run.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_timing import CUDA, cuda_seconds, torch  # bench/torch_timing.py: CUDA events

from kernels import compiler_name, matmul_shape, open_device  # bench/kernels.py
from wgtune import Args, TunableSet, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.errors import ConfigError
from wgtune.gpu.device import check_grid, check_limits
from wgtune.kernels import reduction
from wgtune.kernels.bandwidth import fma_set
from wgtune.kernels.common import with_runtime_checks
from wgtune.kernels.matmul import matmul_set, size_class
from wgtune.kernels.matmul.tiles import C, F, R, T
from wgtune.tune.plan import Plan

SLOW = 10.0  # a first run (and the run after it) this many times the best so far is not sampled

# (M, N, K): every class of issue 14 (odd, small, skinny, K-heavy, rect, square, pow2).
MATMUL_FULL = [
    (64, 64, 65536), (256, 256, 16384), (128, 512, 32768), (16, 1024, 16384), (33, 4096, 4096), (4096, 33, 4096),
    (1, 4096, 4096), (4096, 1, 4096), (8, 8192, 1024), (8192, 16, 1024), (1023, 1025, 1027), (999, 1001, 997),
    (1000, 1000, 1000), (333, 4099, 517), (3001, 2999, 1001), (2047, 2049, 2051), (127, 129, 131), (32, 32, 32),
    (64, 64, 64), (96, 96, 96), (128, 128, 128), (200, 150, 100), (256, 256, 256), (512, 512, 512),
    (1024, 1024, 1024), (2000, 2000, 500), (1024, 4096, 256), (8192, 256, 1024), (3000, 5000, 700),
    (1536, 1536, 1536), (8192, 512, 8192), (5000, 3000, 2000), (4096, 1024, 4096), (2048, 2048, 2048),
    (3072, 3072, 3072), (4096, 4096, 4096),
]
MATMUL_SMALL = [(33, 65, 17), (127, 129, 131), (7, 256, 128), (256, 5, 128), (32, 32, 1024), (128, 128, 128)]
# (rows, cols): many short rows, odd lengths, few long rows, squares.
REDUCTION_FULL = [
    (1_000_000, 7), (262_144, 33), (2_000_000, 3), (65_536, 100), (10_000, 1000), (1 << 20, 64), (1 << 22, 16),
    (1 << 24, 4), (1000, 4097), (4096, 1023), (3, 1_000_003), (333, 777), (3000, 3001), (4, 10_000_019),
    (16, 1_000_001), (2, 100_000_007), (1, 10_000_019), (64, 1 << 20), (8, 1 << 24), (1, 1 << 28),
    (8191, 8191), (16384, 16384), (4096, 4096), (1024, 1024),
]
REDUCTION_SMALL = [(333, 777), (4, 65_537), (16_384, 7), (4096, 33), (100, 1023), (512, 512)]
# N: powers of two from cache-sized to 1 GiB a buffer, odd (f32 bindings only) and even (vec2).
FMA_FULL = [1 << 16, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1_000_003, 10_000_019, 2 * 5_000_011, 100_000_000]
FMA_SMALL = [4096, 65_537, 2 * 32_771, 1 << 18]


@dataclass
class Problem:
    """One family on one shape: the set, the call, the float64 reference output (a torch tensor
    on the GPU where torch has one, else numpy), torch's seconds."""

    family: str
    label: str
    tunables: TunableSet
    args: Args
    want: object
    work: float  # FLOP or bytes
    unit: str
    torch_seconds: float | None
    regime: str
    output: int = 1  # the index of the buffer the checks compare (C, out)

    def ok(self, output: bytes) -> bool:
        """Whether ``output`` (the output buffer's bytes) is within the set's tolerance of the reference."""
        _typecode, atol, rtol = self.tunables.tolerances_for(self.args)[0]
        count = self.want.numel() if CUDA else self.want.size
        got = np.frombuffer(output, np.float32)[:count]
        if CUDA:  # compared on the GPU: numpy takes a second per 4096^2 output
            got = torch.from_numpy(got.copy()).cuda().double().reshape(self.want.shape)
            return bool(torch.all((got - self.want).abs() <= atol + rtol * self.want.abs()))
        got = got.astype(np.float64).reshape(self.want.shape)
        return bool(np.all(np.abs(got - self.want) <= atol + rtol * np.abs(self.want)))


def forced_runtime_checks(tunables: TunableSet, checks: str) -> TunableSet:
    """``tunables`` with every candidate compiled with (``on``) or without (``off``) the runtime
    checks, or as it is (``set``): an A/B of ``Kernel.runtime_checks``."""
    if checks == "set":
        return tunables
    forced = [with_runtime_checks(kernel, checks == "on") for kernel in tunables.candidates]
    return TunableSet(tunables.name, forced, tunables.key_function, outputs=tunables.outputs,
                      input_gen=tunables.input_gen, output_type=tunables.output_type, atol=tunables.atol,
                      rtol=tunables.rtol, reference=tunables.reference)


def matmul_problem(device: NativeDevice, tunables: TunableSet, m: int, n: int, k: int) -> Problem:
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    args = Args((device.create_buffer(a.tobytes()), device.create_buffer(b.tobytes()),
                 device.create_buffer(size=4 * m * n)), (m, n, k))
    if CUDA:
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        want = ta.double() @ tb.double()
        torch.backends.cuda.matmul.allow_tf32 = False
        seconds = cuda_seconds(lambda: ta @ tb)
    else:
        want, seconds = a.astype(np.float64) @ b.astype(np.float64), None
    key = tunables.key(args)
    return Problem("matmul", f"{m}x{n}x{k}", tunables, args, want, 2.0 * m * n * k, "GFLOP/s", seconds,
                   size_class(key), output=2)


def reduction_problem(device: NativeDevice, tunables: TunableSet, op: str, rows: int, cols: int) -> Problem:
    count = rows * cols
    if CUDA:
        x_gpu = torch.rand(count, device="cuda", dtype=torch.float32) * 2 - 1
        x = x_gpu.cpu().numpy()
        view = x_gpu.view(rows, cols)
        want = view.double().sum(dim=1) if op == "sum" else view.amax(dim=1).double()
        run = (lambda: torch.sum(view, dim=-1)) if op == "sum" else (lambda: torch.amax(view, dim=-1))
        seconds = cuda_seconds(run)
    else:
        x = np.random.default_rng(count).uniform(-1, 1, count).astype(np.float32)
        view = x.reshape(rows, cols)
        want = view.astype(np.float64).sum(axis=1) if op == "sum" else view.max(axis=1)
        seconds = None
    # (x, out): the two-pass candidates' partials are scratch the device makes.
    args = Args((device.create_buffer(x.tobytes()), device.create_buffer(size=4 * rows)), (rows, cols))

    key = dict(tunables.key(args))
    regime = "multi_row" if key["cols"] <= reduction.MULTI_ROW_MAX_COLS else (
        "two_pass" if key["rows"] <= reduction.TWO_PASS_MAX_ROWS and key["cols"] >= reduction.TWO_PASS_MIN_COLS
        else "one_pass")
    return Problem(f"row_{op}", f"{rows}x{cols}", tunables, args, want, 4.0 * count + 4.0 * rows, "GB/s",
                   seconds, f"{regime} vec={key.get('vec')}")


def fma_problem(device: NativeDevice, tunables: TunableSet, n: int) -> Problem:
    """``out = alpha * x + b`` over ``n`` floats; torch's figure is ``torch.add(b, x, alpha=)``."""
    alpha = 1.5
    if CUDA:
        x_gpu = torch.rand(n, device="cuda", dtype=torch.float32) * 2 - 1
        b_gpu = torch.rand(n, device="cuda", dtype=torch.float32) * 2 - 1
        x, b = x_gpu.cpu().numpy(), b_gpu.cpu().numpy()
        want = alpha * x_gpu.double() + b_gpu.double()
        seconds = cuda_seconds(lambda: torch.add(b_gpu, x_gpu, alpha=alpha))
    else:
        rng = np.random.default_rng(n)
        x, b = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
        want, seconds = alpha * x.astype(np.float64) + b.astype(np.float64), None
    args = Args((device.create_buffer(x.tobytes()), device.create_buffer(b.tobytes()),
                 device.create_buffer(size=4 * n)), (n, alpha))
    return Problem("fma", str(n), tunables, args, want, 12.0 * n, "GB/s", seconds,
                   f"vec={dict(tunables.key(args))['vec']}", output=2)


# -- measuring ---------------------------------------------------------------------------------------


def _seconds(device: NativeDevice, pipeline, args: Args, grid, repeats: int) -> float:
    return run_inline(device.resolve(run_inline(device.profile(pipeline, args, grid, repeats)))) / repeats


def calibrated_repeats(seconds_a_launch: Callable[[int], float], min_sample: float, most: int = 4096) -> int:
    """Launches a timed pass needs to last ``min_sample`` seconds (``most`` at most), found by
    timing passes of more and more: ``seconds_a_launch(repeats)`` is one such pass's time a launch."""
    repeats = 1
    while True:
        seconds = seconds_a_launch(repeats)
        if seconds * repeats >= min_sample or repeats >= most:
            return repeats
        repeats = min(most, max(repeats * 2, math.ceil(repeats * min_sample * 1.2 / max(seconds * repeats, 1e-9))))


def measure(device: NativeDevice, problem: Problem, compiled: dict, index: int, best: float, samples: int,
            min_sample: float) -> dict:
    """One candidate on one problem: its check, then its median seconds (or why not)."""
    kernel = problem.tunables.candidates[index]
    record = {"family": problem.family, "shape": problem.label, "candidate": kernel.name, "index": index}
    problem_limits = check_limits(kernel, device.limits, device.features)
    if problem_limits:
        return record | {"status": "limit", "why": problem_limits}
    grid = tuple(kernel.grid(problem.args))
    grids = [tuple(stage.grid(problem.args)) for stage in kernel.stages]
    record["workgroups"] = [math.prod(stage_grid) for stage_grid in grids]  # a stage's, in order
    if any(check_grid(stage_grid, device.limits) for stage_grid in grids):
        return record | {"status": "grid"}
    slot = (problem.tunables.name, index)
    if slot not in compiled:
        compiled[slot] = run_inline(device.compile(kernel))
    pipeline = compiled[slot]
    first = _seconds(device, pipeline, problem.args, grid, 1)
    if first > SLOW * best:
        # A pipeline's first launch also pays for its bind groups and scratch (0.4-1.8 ms on an
        # H200, which a kernel of tens of microseconds is 10x under): slow only if a second is too.
        first = _seconds(device, pipeline, problem.args, grid, 1)
    if first > SLOW * best:
        return record | {"status": "slow", "first_s": first}
    if not problem.ok(device.read_buffer_sync(problem.args.buffers[problem.output])):
        return record | {"status": "wrong"}
    repeats = calibrated_repeats(lambda count: _seconds(device, pipeline, problem.args, grid, count), min_sample)
    timed = statistics.median(_seconds(device, pipeline, problem.args, grid, repeats) for _ in range(samples))
    return record | {"status": "ok", "seconds": timed, "rate": problem.work / timed / 1e9}


def probe(device: NativeDevice, problem: Problem, compiled: dict, samples: int, min_sample: float,
          sink, every: bool = False, first_only: bool = False, each: bool = False,
          standings: dict[str, list[float]] | None = None) -> float | None:
    """Probe every candidate on ``problem``; print a line (and one per candidate with ``each``);
    answer the best one's ratio to torch. ``standings`` gains each timed candidate's rate over the
    shape's best (1.0 for the best)."""
    started = time.perf_counter()
    key = problem.tunables.key(problem.args)
    plan = Plan(problem.tunables.candidates, key)
    first = set(plan.next())
    # Every candidate the plan does not skip: what a tune may measure (with --every, also those of
    # groups the key's class skips, which could not serve it better, to see where they stand).
    indices = [i for i, kernel in enumerate(problem.tunables.candidates)
               if i not in plan.skipped or (every and (not callable(kernel.priority) or kernel.priority(key) >= 0))]
    if first_only:  # the first batch alone: a long row's first run in a one-pass candidate takes seconds
        indices = sorted(first)
    results, best = [], math.inf
    for index in indices:
        result = measure(device, problem, compiled, index, best, samples, min_sample)
        result["first_batch"] = index in first
        results.append(result)
        if result["status"] == "ok":
            best = min(best, result["seconds"])
        if sink:
            sink.write(json.dumps(result) + "\n")
    torch_rate = problem.work / problem.torch_seconds / 1e9 if problem.torch_seconds else None
    timed = sorted((r for r in results if r["status"] == "ok"), key=lambda r: -r["rate"])
    wrong = [r["candidate"] for r in results if r["status"] == "wrong"]
    if standings is not None:
        for result in timed:
            standings.setdefault(result["candidate"], []).append(result["rate"] / timed[0]["rate"])

    def figure(result: dict | None) -> str:
        if result is None:
            return "-"
        versus = f" {100 * result['rate'] / torch_rate:5.1f}%" if torch_rate else ""
        return f"{result['candidate']} {result['rate']:,.1f}{versus}"

    in_first = next((r for r in timed if r["first_batch"]), None)
    torch_text = f"{torch_rate:,.1f}" if torch_rate else "-"
    print(f"{problem.family:7} {problem.label:16} {problem.regime:16} torch {torch_text:>9} | best "
          f"{figure(timed[0] if timed else None)} | first batch {figure(in_first)} | "
          f"{len(timed)}/{len(indices)} timed in {time.perf_counter() - started:.1f} s"
          + (f" WRONG {wrong}" if wrong else ""), flush=True)
    for result in results if each else ():
        rate = f"{figure(result)}" if result["status"] == "ok" else f"{result['candidate']} {result['status']}"
        stages = "+".join(map(str, result.get("workgroups", ())))
        print(f"    {'*' if result['first_batch'] else ' '} {rate}" + (f" wg {stages}" if stages else ""), flush=True)
    if sink:
        sink.write(json.dumps({"family": problem.family, "shape": problem.label, "torch_rate": torch_rate,
                               "regime": problem.regime}) + "\n")
        sink.flush()  # a run cut short keeps the shapes it finished
    return timed[0]["rate"] / torch_rate if timed and torch_rate else None


def standing_lines(standings: dict[str, list[float]]) -> list[str]:
    """Each candidate over the shapes it was timed on, best first: how many it led, and the median
    and least of its rate over each shape's best (which tiles to keep, read in one table)."""
    if not standings or max(len(shares) for shares in standings.values()) < 2:
        return []
    lines = [f"{'candidate over the shapes':46} {'shapes':>6} {'led':>4} {'median':>7} {'least':>6}"]
    for name, shares in sorted(standings.items(), key=lambda item: -statistics.median(item[1])):
        led = sum(share == 1.0 for share in shares)
        lines.append(f"{name:46} {len(shares):>6} {led:>4} {statistics.median(shares):>7.3f} {min(shares):>6.3f}")
    return lines


def trial_tiles(expressions: list[str]) -> tuple:
    """The tiles ``--tiles`` names: each expression a tile or a tuple of tiles."""

    found: list = []
    lines = []
    for text in expressions:
        if text.startswith("@"):
            lines += [line.split("#")[0].strip() for line in Path(text[1:]).read_text().splitlines()]
        else:
            lines.append(text)
    for text in filter(None, lines):
        value = eval(text, {"T": T, "R": R, "C": C, "F": F, "replace": replace})  # the user's own command line
        found += list(value) if isinstance(value, (tuple, list)) else [value]
    return tuple(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the H200 shapes")
    parser.add_argument("--only", action="append", help="matmul, row_sum, row_max or fma (repeatable)")
    parser.add_argument("--shapes", default=":", help="a slice of each family's shape list, as START:STOP")
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--min-sample", type=float, default=5e-4)
    parser.add_argument("--deadline", type=float, default=math.inf, help="start no shape after this many seconds")
    parser.add_argument("--out", help="a directory for probe.jsonl")
    parser.add_argument("--every", action="store_true", help="also the candidates of groups the key skips")
    parser.add_argument("--first-batch", action="store_true", help="only the plan's first batch")
    parser.add_argument("--each", action="store_true",
                        help="a line per candidate (* in the plan's first batch): rate and ratio to torch")
    parser.add_argument("--tiles", action="append", help="matmul tiles to probe instead of the set's (repeatable)")
    parser.add_argument("--shape", action="append", type=matmul_shape, metavar="MxNxK",
                        help="a matmul shape instead of the lists' (repeatable)")
    parser.add_argument("--runtime-checks", choices=("set", "on", "off"), default="set",
                        help="compile every candidate with (on) or without (off) WebGPU's runtime checks, "
                             "or as the set says (Kernel.runtime_checks)")
    parser.add_argument("--dawn", action="store_true",
                        help="on Dawn's device (Tint compiles the WGSL, as in Chromium; no float atomics), with its "
                             "robustness off for every kernel unless --runtime-checks on")
    options = parser.parse_args(argv)
    start, _, stop = options.shapes.partition(":")
    part = slice(int(start) if start else None, int(stop) if stop else None)
    only = options.only or ["matmul", "row_sum", "row_max", "fma"]
    unchecked = options.runtime_checks != "on"  # Dawn: for the whole device, not kernel by kernel
    try:
        device = open_device(options.dawn, unchecked)
    except ConfigError as error:
        parser.exit(2, f"kernel_probe.py: {error}\n")
    info = device.adapter_info
    print(f"adapter: {info.get('device', '?')} ({info.get('backend_type', '?')}, "
          f"{compiler_name(options.dawn, unchecked)}); "
          f"torch: {torch.cuda.get_device_name() if CUDA else 'no CUDA GPU'}", flush=True)
    sink = None
    if options.out:
        Path(options.out).mkdir(parents=True, exist_ok=True)
        sink = open(Path(options.out) / "probe.jsonl", "w")  # noqa: SIM115 (open for the whole run)
    began = time.perf_counter()
    compiled: dict = {}
    jobs: list[Callable[[], Problem]] = []
    if "matmul" in only:
        tunables = matmul_set(trial_tiles(options.tiles)) if options.tiles else matmul_set()
        shapes = (options.shape if options.shape else (MATMUL_FULL if options.full else MATMUL_SMALL)[part])
        tunables = forced_runtime_checks(tunables, options.runtime_checks)
        jobs += [lambda s=s: matmul_problem(device, tunables, *s) for s in shapes]
    for op in ("sum", "max"):
        if f"row_{op}" in only:
            tunables_op = forced_runtime_checks(reduction.reduction_set(op), options.runtime_checks)
            jobs += [lambda s=s, op=op, t=tunables_op: reduction_problem(device, t, op, *s)
                     for s in (REDUCTION_FULL if options.full else REDUCTION_SMALL)[part]]
    if "fma" in only:
        tunables_fma = forced_runtime_checks(fma_set(), options.runtime_checks)
        jobs += [lambda n=n: fma_problem(device, tunables_fma, n)
                 for n in (FMA_FULL if options.full else FMA_SMALL)[part]]
    ratios: dict[str, list[float]] = {}
    standings: dict[str, list[float]] = {}
    for job in jobs:
        if time.perf_counter() - began > options.deadline:
            print("deadline reached: the remaining shapes are not probed", flush=True)
            break
        problem = job()
        ratio = probe(device, problem, compiled, options.samples, options.min_sample, sink, options.every,
                      options.first_batch, options.each, standings)
        if ratio is not None:
            ratios.setdefault(problem.family, []).append(ratio)
        for buffer in problem.args.buffers:
            buffer.destroy()
    for family, found in ratios.items():
        print(f"{family}: the best candidate vs torch over {len(found)} shapes: median "
              f"{100 * statistics.median(found):.1f}%, min {100 * min(found):.1f}%, "
              f"{sum(r < 0.8 for r in found)} under 80%, {sum(r < 0.9 for r in found)} under 90%")
    if options.each:
        for line in standing_lines(standings):
            print(line)
    print(f"probed in {time.perf_counter() - began:.0f} s", flush=True)
    if sink:
        sink.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
