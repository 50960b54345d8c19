"""The sets with tiles on subgroup matrices, tuned as they ship on a Dawn device (issue 31, item 3).

For each shape (a fixed list and a seeded random draw, ``held_out.draw_suite``) and each set:

- ``matmul_f16_products`` (``matmul_set(precision="f16-products")``): f32 A, B, C;
- ``matmul_f16``: f16 A, B, C;

a fresh tuner (cache off, output checks on) tunes the call on a :class:`DawnDevice`, its winner's
output (C filled with NaN first) is compared with float64 (the error's largest value over
``sum |a b|`` of its element, on 256 rows: for f32 inputs this is the precision a winner gives;
for f16 inputs, against the f16 values), and the winner is timed as a tune times it (GPU
timestamps). Beside it torch on the same shape: fp32 with TF32 off and on, and f16 (plain loop of
launches and CUDA graph, ``subgroup_matrix_matmul.torch_rates``).

Run on a GPU machine with wgpudawn, numpy and torch::

    python bench/subgroup_matrix_tune.py                  # the fixed shapes and 12 drawn
    python bench/subgroup_matrix_tune.py --draw 30 --seed 5 --sets f16-products
    python bench/subgroup_matrix_tune.py --suite --draw 0     # the shape suite's 36 shapes

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from held_out import draw_suite, fresh_seed  # bench/held_out.py
from subgroup_matrix_matmul import torch_rates  # bench/subgroup_matrix_matmul.py

from kernels import time_candidate  # bench/kernels.py
from wgtune import Args, Config
from wgtune.backends.dawn import SUBGROUP_MATRIX, DawnDevice
from wgtune.kernels.matmul import matmul_f16_set, matmul_set
from wgtune.tuner import Tuner

FIXED = ((4096, 4096, 4096), (2048, 2048, 2048), (8192, 8192, 4096), (1000, 1000, 1000), (3001, 2999, 1001),
         (795, 4687, 1480), (333, 4099, 517), (2047, 2049, 2051), (8192, 512, 8192), (512, 512, 512))
SETS = {"f16-products": ("f32", lambda: matmul_set(precision="f16-products")), "f16": ("f16", matmul_f16_set)}


def make_args(device: DawnDevice, shape: tuple[int, int, int], dtype: str, seed: int) -> tuple[Args, np.ndarray,
                                                                                              np.ndarray]:
    """Buffers A, B (uniform in [-1, 1]) and C (NaN) of ``dtype``; A and B as the GPU reads them."""
    m, n, k = shape
    rng = np.random.default_rng(seed)
    kind = np.float32 if dtype == "f32" else np.float16
    a = rng.uniform(-1, 1, (m, k)).astype(kind)
    b = rng.uniform(-1, 1, (k, n)).astype(kind)
    c = np.full(m * n + (m * n) % 2, np.nan, dtype=kind)  # f16 buffers: whole words
    buffers = tuple(device.create_buffer(x.tobytes()) for x in (a, b, c))
    return Args(buffers, (m, n, k)), a, b


def precision(device: DawnDevice, args: Args, a: np.ndarray, b: np.ndarray) -> str:
    """The winner's output against float64 of the inputs: NaN count, then max error / sum |a b|."""
    m, n, _ = args.params
    got = np.frombuffer(device.read_buffer_sync(args.buffers[2]), dtype=a.dtype)[:m * n].reshape(m, n)
    bad = int((~np.isfinite(got)).sum())
    if bad:
        return f"WRONG {bad} not finite"
    rows = np.random.default_rng(1).choice(m, size=min(m, 256), replace=False)
    a64, b64 = a[rows].astype(np.float64), b.astype(np.float64)
    worst = float(np.max(np.abs(got[rows].astype(np.float64) - a64 @ b64) / (np.abs(a64) @ np.abs(b64))))
    return f"{worst:.1e}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draw", type=int, default=12, help="shapes drawn at random besides the fixed ones")
    parser.add_argument("--seed", type=int, default=None, help="the draw's seed (default: a fresh one, printed)")
    parser.add_argument("--fixed", type=int, default=len(FIXED), help="how many of the fixed shapes")
    parser.add_argument("--suite", action="store_true",
                        help="the shape suite's 36 matmul shapes (bench/shapes.py) instead of the fixed ones")
    parser.add_argument("--sets", default="f16-products,f16", help="comma-separated: f16-products, f16")
    parser.add_argument("--samples", type=int, default=None, help="samples a candidate (default: the config's)")
    parser.add_argument("--unchecked", action="store_true",
                        help="open Dawn without its robustness (DawnDevice.open(runtime_checks=False))")
    options = parser.parse_args(argv)
    seed = fresh_seed() if options.seed is None else options.seed
    if options.suite:
        from shapes import MATMUL_FULL  # bench/shapes.py

        shapes = [((m, n, k), f"suite:{tag}") for m, n, k, tag in MATMUL_FULL]
    else:
        shapes = [(shape, "fixed") for shape in FIXED[:options.fixed]]
    shapes += [(shape, f"held:{tag}") for shape, tag in draw_suite("matmul", options.draw, seed)]
    device = DawnDevice.open(runtime_checks=not options.unchecked)
    configs = [(c.get("m"), c.get("n"), c.get("k"), c.get("component_type"), c.get("result_component_type"))
               for c in device.subgroup_matrix_configs]
    print(f"adapter: {device.identity.device} ({device.identity.backend}); {SUBGROUP_MATRIX}: "
          f"{SUBGROUP_MATRIX in device.features}; runtime checks {'on' if device.runtime_checks else 'off'}; "
          f"configs {configs}")
    print(f"held out: {options.draw} shapes drawn with seed {seed} (bench/held_out.py draw_suite)")
    config = Config(cache=False, log_level="disabled", isolate=False,
                    **({"samples": options.samples} if options.samples else {}))
    for label in options.sets.split(","):
        dtype, build = SETS[label]
        tunables = build()
        torch_label = "torch f16" if dtype == "f16" else "torch fp32"
        print(f"\n{tunables.name}: {dtype} A, B, C ({len(tunables)} candidates); rates in TFLOP/s; "
              f"vs: against {torch_label} (plain / CUDA graph){'' if dtype == 'f16' else ', and TF32 (graph)'}")
        print(f"{'shape':18s} {'class':13s} {'winner':34s} {'tune s':>6s} {'wgtune':>7s} {'torch':>7s} "
              f"{'vs':>6s} {'graph':>6s} {'TF32':>6s}  error/sum|ab|")
        ratios = []
        for index, (shape, tag) in enumerate(shapes):
            m, n, k = shape
            args, a, b = make_args(device, shape, dtype, seed=index)
            started = time.perf_counter()
            try:
                winner = Tuner(device, config=config).execute(tunables, args)
            except Exception as error:  # a shape that fails says why and the run goes on
                print(f"{m}x{n}x{k:<10} {tag:13s} FAILED {type(error).__name__}: {str(error)[:160]}")
                continue
            tune_s = time.perf_counter() - started
            error = precision(device, args, a, b)
            seconds = time_candidate(device, tunables, tunables.index_of[winner.name], args, config).stats.median
            rate = 2 * m * n * k / seconds / 1e12
            try:
                torch = torch_rates(m, n, k)
            except Exception:  # the wgtune figures stand without torch
                torch = {}
            plain, graph = torch.get(torch_label, (None, None))
            tf32 = torch.get("torch fp32+TF32", (None, None))[1] if dtype == "f32" else None

            def share(base: float | None, rate: float = rate) -> str:
                return f"{rate / base:6.0%}" if base else "     -"

            if plain:
                ratios.append((tag, rate / plain, rate / graph))
            print(f"{f'{m}x{n}x{k}':18s} {tag:13s} {winner.name:34s} {tune_s:6.1f} {rate:7.1f} "
                  f"{plain or 0:7.1f} {share(plain)} {share(graph)} {share(tf32)}  {error}")
        if ratios:
            for which in ("fixed", "suite", "held"):
                picked = [r for r in ratios if r[0].startswith(which)]
                if picked:
                    print(f"  {which}: median vs {torch_label} {statistics.median(r[1] for r in picked):.1%} plain, "
                          f"{statistics.median(r[2] for r in picked):.1%} graph over {len(picked)} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
