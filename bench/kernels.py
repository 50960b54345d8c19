"""Tune each kernel family on the adapter in hand and print what tuning bought, beside torch.

For every registered family (``wgtune.kernels.families.FAMILIES``) and size: a fresh tune (no
cache), then the winner and candidate 0 (the plain
default) are timed side by side with the core's own sampling (GPU timestamps where the adapter
has them), and their throughput printed: GFLOP/s for matmul, GB/s (bytes read + written) for the
bandwidth kernels. Where torch sees a CUDA GPU, torch's figure for the same work is measured in
the same run (CUDA events, median of the same number of samples): fp32 matmul with TF32 off,
device copy and ``alpha * x + b`` for fma, ``torch.sum`` / ``torch.amax`` along the last axis
for the reductions. The winner's output is checked against numpy or torch before any figure is
printed. A family this file has no workloads of (:data:`BENCH`) is benchmarked from its record
alone: its calls on its demo sizes, its output checked against its reference, its throughput the
bytes of its buffers a second (:func:`family_workload`).

Usage::

    python bench/kernels.py                 # small sizes (seconds on lavapipe)
    python bench/kernels.py --full          # the H200 sizes: matmul 4096^3, 1 GiB arrays, 2^28 floats
    python bench/kernels.py --only matmul   # one family
    python bench/kernels.py --list          # the workloads, without running any
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch_timing import CUDA, TorchSeconds, torch, torch_seconds  # bench/torch_timing.py

from wgtune import Args, Config, Measured, TrialFinished, TunableSet, Tuner, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.clock import clock_grain
from wgtune.kernels.bandwidth import fma_set
from wgtune.kernels.families import FAMILIES, family_names
from wgtune.kernels.family import Family, Size
from wgtune.kernels.matmul import matmul_f16_set, matmul_set
from wgtune.tune.fixed import run_candidate
from wgtune.tune.measure import Bench, sample_floor
from wgtune.tune.pipelines import PipelineCache
from wgtune.tune.request import TuneRequest


@dataclass
class Workload:
    """One family on one size: how to build the call, what the work is, how torch does it."""

    family: str
    label: str
    tunables: TunableSet
    make: Callable[[NativeDevice], tuple[Args, dict]]  # the call, and the numpy inputs by name
    work: float  # FLOP, or bytes moved
    unit: str  # "GFLOP/s" or "GB/s"
    expected: Callable[[dict], np.ndarray]  # the exact output for the inputs, flat (float64 for sums)
    torch_figure: Callable[[dict], tuple[str, TorchSeconds]] | None = None  # (what, seconds per run)
    out_dtype: type = np.float32  # what the output buffer holds

    @property
    def out_index(self) -> int:
        """Which of the call's buffers is the output."""
        return self.tunables.outputs[0] if self.tunables.outputs else 2

    def output(self, data: bytes, count: int) -> np.ndarray:
        """The output's first ``count`` values from its buffer's bytes (padded to whole words)."""
        return np.frombuffer(data, dtype=self.out_dtype)[:count]


def open_device(dawn: bool = False, unchecked: bool = False) -> NativeDevice:
    """wgpu-native's device (naga compiles the WGSL; each kernel's ``runtime_checks`` kept), or
    Dawn's (Tint compiles it, as Chromium does), with its robustness off for every kernel where
    ``unchecked`` (Dawn has no per-kernel way). Raises ConfigError where there is no adapter, or
    no wgpudawn for ``dawn``."""
    if not dawn:
        return NativeDevice.open()
    from wgtune.backends.dawn import DawnDevice

    return DawnDevice.open(runtime_checks=not unchecked)


def compiler_name(dawn: bool, unchecked: bool) -> str:
    """What :func:`open_device` opened, for a report's adapter line."""
    return ("Dawn, robustness off" if unchecked else "Dawn") if dawn else "wgpu-native"


def seeded(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(np.float32)


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    scale = max(1e-30, float(np.max(np.abs(want)))) if want.size else 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale if want.size else 0.0


# -- the workloads -------------------------------------------------------------------------------


def matmul_shape(text: str) -> tuple[int, int, int]:
    """``MxNxK`` as three sizes of at least 1 (an argparse type: a bad one is a usage error naming it)."""
    try:
        m, n, k = (int(side) for side in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a matmul shape is MxNxK, got {text!r}") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"a matmul shape's sizes are at least 1, got {text!r}")
    return m, n, k


def matmul_workload(m: int, n: int, k: int) -> Workload:
    def make(device: NativeDevice) -> tuple[Args, dict]:
        a, b = seeded((m, k), 1), seeded((k, n), 2)
        buffers = (device.create_buffer(a.tobytes()), device.create_buffer(b.tobytes()),
                   device.create_buffer(size=4 * m * n))
        return Args(buffers, (m, n, k)), {"a": a, "b": b}

    def expected(inputs: dict) -> np.ndarray:
        if CUDA:
            want = (torch.from_numpy(inputs["a"]).cuda().double() @ torch.from_numpy(inputs["b"]).cuda().double())
            return want.cpu().numpy().reshape(-1)
        return (inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)).reshape(-1)

    def with_torch(inputs: dict) -> tuple[str, TorchSeconds]:
        torch.backends.cuda.matmul.allow_tf32 = False
        a, b = torch.from_numpy(inputs["a"]).cuda(), torch.from_numpy(inputs["b"]).cuda()
        return "torch fp32 matmul (TF32 off)", torch_seconds(lambda: a @ b)

    return Workload("matmul", f"{m}x{n}x{k}", matmul_set(), make, 2.0 * m * n * k, "GFLOP/s", expected, with_torch)


def matmul_f16_workload(m: int, n: int, k: int) -> Workload:
    """f16 A, B and C (f32 sums inside the kernels); torch's figure is its f16 matmul."""

    def make(device: NativeDevice) -> tuple[Args, dict]:
        a, b = seeded((m, k), 1).astype(np.float16), seeded((k, n), 2).astype(np.float16)
        pad = lambda data: data + bytes(-len(data) % 4)  # noqa: E731 (buffer sizes are whole words)
        buffers = (device.create_buffer(pad(a.tobytes())), device.create_buffer(pad(b.tobytes())),
                   device.create_buffer(size=2 * m * n + (2 * m * n) % 4))
        return Args(buffers, (m, n, k)), {"a": a, "b": b}

    def expected(inputs: dict) -> np.ndarray:
        return (inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)).reshape(-1)

    def with_torch(inputs: dict) -> tuple[str, TorchSeconds]:
        a, b = torch.from_numpy(inputs["a"]).cuda(), torch.from_numpy(inputs["b"]).cuda()
        return "torch f16 matmul", torch_seconds(lambda: a @ b)

    return Workload("matmul_f16", f"{m}x{n}x{k}", matmul_f16_set(), make, 2.0 * m * n * k, "GFLOP/s", expected,
                    with_torch, out_dtype=np.float16)


def fma_workload(n: int) -> Workload:
    alpha = 1.5

    def make(device: NativeDevice) -> tuple[Args, dict]:
        x, b = seeded((n,), 3), seeded((n,), 4)
        buffers = (device.create_buffer(x.tobytes()), device.create_buffer(b.tobytes()),
                   device.create_buffer(size=4 * n))
        return Args(buffers, (n, alpha)), {"x": x, "b": b}

    def expected(inputs: dict) -> np.ndarray:
        return np.float32(alpha) * inputs["x"] + inputs["b"]

    def with_torch(inputs: dict) -> tuple[str, TorchSeconds]:
        x = torch.from_numpy(inputs["x"]).cuda()
        out = torch.empty_like(x)
        copy = torch_seconds(lambda: out.copy_(x))
        # The same bytes as the fma (read 2, write 1) at torch's device-copy bandwidth (read 1, write 1).
        return "torch device copy, as GB/s", copy.scaled(3 / 2)

    label = f"{n} floats ({4 * n / 2**30:.2f} GiB/array)" if n >= 2**26 else f"{n}"
    return Workload("fma", label, fma_set(), make, 12.0 * n, "GB/s", expected, with_torch)


def reduction_workload(op: str, rows: int, cols: int) -> Workload | None:
    try:
        from wgtune.kernels import reduction
    except ImportError:
        return None
    tunables = reduction.reduction_set(op)

    def make(device: NativeDevice) -> tuple[Args, dict]:
        x = seeded((rows, cols), 5)
        # (x, out): the two-pass candidates' partials are scratch the device makes.
        buffers = (device.create_buffer(x.tobytes()), device.create_buffer(size=4 * rows))
        return Args(buffers, (rows, cols)), {"x": x}

    def expected(inputs: dict) -> np.ndarray:
        x = inputs["x"].astype(np.float64)
        return x.sum(axis=1) if op == "sum" else x.max(axis=1)

    def with_torch(inputs: dict) -> tuple[str, TorchSeconds]:
        x = torch.from_numpy(inputs["x"]).cuda()
        if op == "sum":
            return "torch.sum(dim=-1)", torch_seconds(lambda: torch.sum(x, dim=-1))
        return "torch.amax(dim=-1)", torch_seconds(lambda: torch.amax(x, dim=-1))

    return Workload(f"row_{op}", f"{rows}x{cols}", tunables, make, 4.0 * rows * cols + 4.0 * rows, "GB/s",
                    expected, with_torch)


class RecordingDevice:
    """A stand-in device for a family's ``make_args``: it makes no buffers; a buffer is its index,
    and the device keeps each one's size and the bytes of those made from data."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.data: list[bytes | None] = []  # None for a buffer made by size

    def create_buffer(self, data: bytes | None = None, size: int | None = None, **_: Any) -> int:
        self.data.append(bytes(data) if data is not None else None)
        self.sizes.append(len(data) if data is not None else int(size or 0))
        return len(self.sizes) - 1

    @property
    def bytes(self) -> int:
        """The bytes of every buffer made."""
        return sum(self.sizes)


def family_workload(family: Family, size: Size) -> Workload:
    """A workload from ``family``'s record alone: its call of ``size`` (``make_args``), its inputs
    read back from the device and its output checked against ``family.reference``; the work is
    the bytes of every buffer (each read or written once), in GB/s; no torch figure."""
    recorder = RecordingDevice()
    family.make_args(recorder, size)
    tunables = family.build()
    dtype = np.float16 if family.element == "f16" else np.float32
    params: list[tuple] = []

    def make(device: NativeDevice) -> tuple[Args, dict]:
        args = family.make_args(device, size)
        params[:] = [args.params]
        inputs = {f"buffer{index}": np.frombuffer(device.read_buffer_sync(buffer), dtype=dtype)
                  for index, buffer in enumerate(args.buffers) if index not in tunables.outputs}
        return args, inputs

    def expected(inputs: dict) -> np.ndarray:
        values = [array.astype(np.float64).tolist() for array in inputs.values()]
        return np.asarray(family.reference(values, params[0]), dtype=np.float64)

    return Workload(family.name, "x".join(map(str, size)), tunables, make, float(recorder.bytes), "GB/s", expected,
                    out_dtype=dtype)


def _matmul_workloads(full: bool) -> list[Workload]:
    if full:
        return [matmul_workload(4096, 4096, 4096), matmul_workload(2048, 2048, 2048), matmul_workload(4096, 1024, 4096)]
    return [matmul_workload(256, 256, 256), matmul_workload(320, 192, 130)]


def _matmul_f16_workloads(full: bool) -> list[Workload]:
    return [matmul_f16_workload(4096, 4096, 4096) if full else matmul_f16_workload(256, 256, 256)]


def _fma_workloads(full: bool) -> list[Workload]:
    return [fma_workload(1 << 28)] if full else [fma_workload(1 << 20), fma_workload(1_000_003)]


def _row_sum_workloads(full: bool) -> list[Workload | None]:
    if full:
        return [reduction_workload("sum", 1 << 14, 1 << 14), reduction_workload("sum", 1, 1 << 28)]
    return [reduction_workload("sum", 1024, 1024), reduction_workload("sum", 1, 1 << 20)]


def _row_max_workloads(full: bool) -> list[Workload | None]:
    return [reduction_workload("max", 1 << 14, 1 << 14) if full else reduction_workload("max", 333, 777)]


BENCH: dict[str, Callable[[bool], list[Workload | None]]] = {
    "matmul": _matmul_workloads,
    "matmul_f16": _matmul_f16_workloads,
    "fma": _fma_workloads,
    "row_sum": _row_sum_workloads,
    "row_max": _row_max_workloads,
}
"""This file's own workloads of a family, by set name (``full``: the H200 sizes): numpy inputs and
torch's figure beside. A family without an entry gets :func:`family_workload` on its demo sizes."""


def workloads(full: bool) -> list[Workload]:
    """Every registered family's workloads, in the registry's order: this file's own where it has
    them (:data:`BENCH`), else the family's record on its demo sizes."""
    found: list[Workload | None] = []
    for family in FAMILIES:
        own = BENCH.get(family.name)
        found.extend(own(full) if own is not None else [family_workload(family, size) for size in family.demo_sizes])
    return [w for w in found if w is not None]


# -- measuring -------------------------------------------------------------------------------------


def time_candidate(device: NativeDevice, tunables: TunableSet, index: int, args: Args, config: Config) -> Measured:
    """Candidate ``index`` timed as a tune times it (warmups, calibrated samples)."""

    floor = sample_floor(run_inline(clock_grain(device)), config)
    request = TuneRequest(device, PipelineCache(device), config, tunables, tunables.key(args), args)
    result = run_inline(run_candidate(Bench(request, args, floor), index))
    if not isinstance(result, Measured) or result.stats is None:
        raise RuntimeError(f"{tunables.candidates[index].name} did not run: {result}")
    return result


@dataclass
class Tuned:
    """One fresh tune of a workload (no cache): the call it ran on and what it picked."""

    args: Args
    inputs: dict  # the numpy inputs by name
    want: np.ndarray  # the exact output (Workload.expected)
    index: int  # the winner's index in the set
    measured: int  # candidates that were measured
    seconds: float  # the tune's wall time, compiles included
    error: float  # the winner's output: max error relative to the largest exact value
    tuner: Tuner  # the tuner that ran it, its winner for the call kept (cache off: in memory only)


def tune(workload: Workload, device: NativeDevice, config: Config) -> Tuned:
    """The tune as it ships: a fresh tuner on a new call of ``workload``, its output checked."""
    args, inputs = workload.make(device)
    trials: list[TrialFinished] = []
    tuner = Tuner(device, config=config, observer=lambda e: trials.append(e) if isinstance(e, TrialFinished) else 0)
    started = time.perf_counter()
    winner = tuner.execute(workload.tunables, args)
    tune_seconds = time.perf_counter() - started
    want = workload.expected(inputs)
    error = rel_error(workload.output(device.read_buffer_sync(args.buffers[workload.out_index]), want.size), want)
    measured = len({t.index for t in trials if isinstance(t.result, Measured)})
    return Tuned(args, inputs, want, workload.tunables.index_of[winner.name], measured, tune_seconds, error, tuner)


def run(workload: Workload, device: NativeDevice, config: Config) -> dict:
    tuned = tune(workload, device, config)
    index, args = tuned.index, tuned.args
    best = time_candidate(device, workload.tunables, index, args, config)
    first = best if index == 0 else time_candidate(device, workload.tunables, 0, args, config)
    row = {
        "family": workload.family, "size": workload.label, "winner": workload.tunables.candidates[index].name,
        "measured": tuned.measured,
        "candidates": len(workload.tunables),
        "tune_s": tuned.seconds, "error": tuned.error,
        "winner_rate": workload.work / best.stats.median, "first_rate": workload.work / first.stats.median,
        "unit": workload.unit,
    }
    if CUDA and workload.torch_figure is not None:
        what, seconds = workload.torch_figure(tuned.inputs)
        row["torch"] = what
        row["torch_rate"] = workload.work / seconds.plain
    return row


def scaled(rate: float, unit: str) -> str:
    return f"{rate / 1e9:,.1f}"


def selected(found: list[Workload], only: list[str] | None) -> list[Workload]:
    """The workloads of the families in ``only`` (a set name, or its last part: ``sum`` for
    ``row_sum``), or all of them."""
    if not only:
        return found
    return [w for w in found if w.family in only or w.family.split("_")[-1] in only]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the H200 sizes (matmul 4096^3, 1 GiB, 2^28 floats)")
    parser.add_argument("--only", action="append", help=f"only this family ({', '.join(family_names())})")
    parser.add_argument("--samples", type=int, default=10, help="timed samples per candidate (default 10)")
    parser.add_argument("--list", action="store_true", help="list the workloads (family, size, candidates); run none")
    options = parser.parse_args(argv)
    if options.list:
        for workload in selected(workloads(options.full), options.only):
            print(f"{workload.family:12} {workload.label:26} {len(workload.tunables):>4} candidates  {workload.unit}")
        return 0
    device = NativeDevice.open()
    config = Config(cache=False, log_level="disabled", samples=options.samples)
    info = device.adapter_info
    print(f"adapter: {info.get('device', '?')} ({info.get('backend_type', '?')}), timing {device.timing}; "
          f"torch: {torch.__version__ + ' on ' + torch.cuda.get_device_name() if CUDA else 'no CUDA GPU'}")
    header = (f"{'family':8} {'size':26} {'winner':28} {'tried':>7} {'tune s':>7} {'winner':>10} {'first':>10} "
              f"{'speedup':>8} {'torch':>10} {'vs torch':>9}  unit    max rel err")
    print(header)
    print("-" * len(header))
    for workload in selected(workloads(options.full), options.only):
        row = run(workload, device, config)
        torch_rate = row.get("torch_rate")
        versus = f"{100 * row['winner_rate'] / torch_rate:.1f}%" if torch_rate else "-"
        print(f"{row['family']:8} {row['size']:26} {row['winner']:28} {row['measured']:>3}/{row['candidates']:<3} "
              f"{row['tune_s']:>7.1f} {scaled(row['winner_rate'], row['unit']):>10} "
              f"{scaled(row['first_rate'], row['unit']):>10} {row['winner_rate'] / row['first_rate']:>7.2f}x "
              f"{scaled(torch_rate, row['unit']) if torch_rate else '-':>10} "
              f"{versus:>9}  "
              f"{row['unit']:7} {row['error']:.1e}", flush=True)
        if math.isfinite(row["error"]) and row["error"] > 1e-3:
            print(f"  !! the winner's output is off by {row['error']:.2e} (relative)", file=sys.stderr)
    if CUDA:
        print("\ntorch columns: fp32 matmul with TF32 off; fma as device-copy bandwidth over the fma's bytes "
              "(read 2 + write 1); reductions torch.sum / torch.amax along the last axis; CUDA events, median.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
