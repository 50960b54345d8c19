"""How fast a matmul on Dawn's subgroup matrices runs (issue 31, item 3's first question): tensor
cores from WGSL, measured before any of it goes into wgtune.

``bench/coop_matrix_dawn.py`` found that PyPI's ``wgpudawn`` opens a device with
``chromium-experimental-subgroup-matrix`` on an H200 (toggles ``allow_unsafe_apis`` and
``vulkan_enable_f16_on_nvidia``) and that f16 -> f32 products are accumulated at full f32. This
asks whether such kernels are fast: tiled matmuls ``C[M, N] (f32) = A[M, K] @ B[K, N] (f16)``,
row-major, each subgroup owning ``fm x fn`` result matrices of 16x16, ``wm x wn`` subgroups a
workgroup, loading A and B from global memory (``staged=False``) or from workgroup memory that
the workgroup fills a K step of 32 at a time (``staged=True``). Each variant's output is checked
against float64 of the very f16 inputs, on a C that starts as NaN (an element never written fails),
then timed by wall clock over many launches in one submission; the f32 -> f16 copies an f32 matmul
would need are timed too. Beside them: torch's f16 matmul and its fp32 one with TF32 off and on,
each as a plain loop of launches and as a CUDA graph.

The first H200 run (``h200-subgroup-matrix-matmul.txt``) put the direct ``sgm1x1_f4x4`` at 71-74
TFLOP/s and those staged kernels (scalar f16 copies, two barriers a step) at 10-16. The ``Staged``
variants after them (index 8 on, names ``st<subgroups>_<block>_f<fragments>_k<K step>``) stage
well: 4 or 8 subgroups share a 128x128, 128x256 or 256x128 block; A and B are read as
``array<vec4<u32>>`` (8 f16 a load) and kept in workgroup arrays of ``vec4<u32>``, which
``subgroupMatrixLoad`` reads as f16 (offsets and strides count 16-byte elements; ``_h``: ``array<f16>``
filled one f16 at a time); rows padded by 16 bytes; ``_db`` double-buffered (step k + 1 loaded into
registers during step k's products, one barrier a step), else one buffer and two barriers; blocks
launched 8 block rows at a time (``_g1``: row by row). They take up to 37 KiB of workgroup storage:
the device is asked for the adapter's most, and a variant over the device's limit is skipped.
The variants' WGSL is ``bench/subgroup_matrix_kernels.py``'s; this script opens the device, checks
and times them.

Run on a GPU machine with wgpudawn (and torch for the baselines)::

    python bench/subgroup_matrix_matmul.py                    # 2048^3, 4096^3, 8192x8192x4096
    python bench/subgroup_matrix_matmul.py --shape 4096x4096x4096 --variants 0:3
    python bench/subgroup_matrix_matmul.py --variants 8:      # the Staged variants alone
    python bench/subgroup_matrix_matmul.py --compile-only     # WGSL checked on Dawn's Null backend

``--compile-only`` compiles every variant's WGSL and pipeline on Dawn's Null backend
(``WGPU_BACKEND_TYPE=Null``), which validates the shader as Dawn's front end does but runs
nothing: what a machine without such a GPU can check. Null offers 16 KiB of workgroup storage: a
kernel over it has its module validated and its pipeline refused for that alone, with Dawn's count
of its bytes checked against the variant's. Shapes must be multiples of every variant's block
(M and N of 256, K of 64).
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from subgroup_matrix_kernels import ALL, CONVERT, Staged, kernel  # bench/subgroup_matrix_kernels.py

FEATURE = "chromium-experimental-subgroup-matrix"
TOGGLES = ["allow_unsafe_apis", "vulkan_enable_f16_on_nvidia"]
SHAPES = ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 4096))


def open_device(null: bool):
    import wgpudawn as wgpu
    from wgpudawn.backends.dawn import extras

    if null:
        os.environ["WGPU_BACKEND_TYPE"] = "Null"
    known = extras.all_toggles()
    extras.set_instance_extras(enable_toggles=[toggle for toggle in TOGGLES if toggle in known])
    print(f"toggles: {', '.join(toggle for toggle in TOGGLES if toggle in known)}")
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if FEATURE not in adapter.features:
        raise SystemExit(f"{adapter.info.get('device')}: no {FEATURE} (features: {sorted(adapter.features)})")
    configs = extras.get_adapter_properties(adapter).get("subgroup_matrix_configs", [])
    wanted = [FEATURE, "shader-f16", "subgroups"]
    limits = {"max-compute-invocations-per-workgroup": adapter.limits["max-compute-invocations-per-workgroup"],
              "max-compute-workgroup-size-x": adapter.limits["max-compute-workgroup-size-x"],
              "max-compute-workgroup-storage-size": adapter.limits["max-compute-workgroup-storage-size"],
              "max-storage-buffer-binding-size": adapter.limits["max-storage-buffer-binding-size"],
              "max-buffer-size": adapter.limits["max-buffer-size"]}
    device = adapter.request_device_sync(required_features=wanted, required_limits=limits)
    subgroup = max((c["max_subgroup_size"] for c in configs), default=adapter.limits.get("max-subgroup-size", 128))
    return wgpu, adapter, device, configs, int(subgroup or 128)


def pipeline_for(device, code: str):
    module = device.create_shader_module(code=code)
    return device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})


def compile_only() -> int:
    """Every variant's WGSL and pipeline on Dawn's Null backend; 1 where any is refused.

    The Null adapter offers 16 KiB of workgroup storage, less than most staged kernels take: for those
    the shader module is built (WGSL parsed and validated) and the pipeline is refused for its storage
    alone, which counts as compiled where Dawn's count of the bytes is the variant's own."""
    _wgpu, adapter, device, _configs, widest = open_device(null=True)
    limit = adapter.limits["max-compute-invocations-per-workgroup"]
    storage = device.limits["max-compute-workgroup-storage-size"]
    print(f"Dawn {adapter.info.get('backend_type')} backend: workgroups of a multiple of {widest} invocations, "
          f"at most {limit}; {storage} bytes of workgroup storage")
    failed = 0
    for variant in ALL:
        # The H200's subgroups are 32 wide; the Null backend wants workgroups a multiple of its widest.
        fits = [size for size in (32, widest)
                if (variant.wm * variant.wn * size) % widest == 0 and variant.wm * variant.wn * size <= limit]
        if not fits:
            print(f"  {variant.name}: no subgroup size fits this adapter's limits: not compiled here")
            continue
        label = f"subgroups of {fits[0]}, {variant.workgroup_bytes} bytes of workgroup storage"
        try:
            pipeline_for(device, kernel(variant, fits[0]))
            print(f"  {variant.name}: compiled ({label})")
        except Exception as error:
            counted = re.search(r"total use of workgroup storage \((\d+) bytes\)", str(error))
            if counted and int(counted.group(1)) == variant.workgroup_bytes > storage:
                print(f"  {variant.name}: compiled ({label}: the module; the pipeline over Null's {storage} bytes)")
                continue
            failed += 1
            print(f"  {variant.name}: REFUSED {error}")
    # Twins of the staged kernels small enough for Null's workgroup storage: their whole pipelines.
    twins = (Staged(2, 2, 2, 2, bk=16), Staged(2, 2, 2, 2, bk=16, buffers=1), Staged(2, 2, 2, 2, bk=16, wide=False))
    for twin in twins:
        try:
            pipeline_for(device, kernel(twin, 32))
            print(f"  {twin.name} (a small twin, not timed): compiled ({twin.workgroup_bytes} bytes, the pipeline too)")
        except Exception as error:
            failed += 1
            print(f"  {twin.name} (a small twin, not timed): REFUSED {error}")
    pipeline_for(device, CONVERT)
    print("  f32 -> f16 copy: compiled")
    return 1 if failed else 0


class Runner:
    """One shape's buffers on the device, and the launches of one pipeline over them, timed."""

    def __init__(self, wgpu, device, m: int, n: int, k: int, seed: int = 0) -> None:
        import numpy as np

        self.device, self.shape = device, (m, n, k)
        rng = np.random.default_rng(seed)
        self.a32 = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        self.b32 = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        self.a16, self.b16 = self.a32.astype(np.float16), self.b32.astype(np.float16)
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.a = device.create_buffer_with_data(data=self.a16.tobytes(), usage=usage)
        self.b = device.create_buffer_with_data(data=self.b16.tobytes(), usage=usage)
        self.c = device.create_buffer(size=4 * m * n, usage=usage)
        self.a_src = device.create_buffer_with_data(data=self.a32.tobytes(), usage=usage)
        self.params = device.create_buffer_with_data(data=struct.pack("4I", m, n, k, 0),
                                                     usage=wgpu.BufferUsage.UNIFORM)
        self.count = device.create_buffer_with_data(data=struct.pack("4I", m * k, 0, 0, 0),
                                                    usage=wgpu.BufferUsage.UNIFORM)
        self.sync = device.create_buffer(size=16, usage=usage)

    def bind(self, pipeline, buffers) -> object:
        return self.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": buf}} for i, buf in enumerate(buffers)])

    def launch(self, pipeline, group, grid: tuple[int, int], times: int) -> float:
        """Seconds a launch, by wall clock over ``times`` launches in one pass and one submission."""
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        for _ in range(times):
            compute.dispatch_workgroups(*grid)
        compute.end()
        start = time.perf_counter()
        self.device.queue.submit([encoder.finish()])
        self.device.queue.read_buffer(self.sync)  # waits for the work before it
        return (time.perf_counter() - start) / times

    def timed(self, pipeline, group, grid: tuple[int, int]) -> float:
        once = self.launch(pipeline, group, grid, 3)
        times = max(5, min(2000, int(0.2 / max(once, 1e-7))))
        return min(self.launch(pipeline, group, grid, times) for _ in range(3))

    def check(self, pipeline, group, grid) -> str:
        """Run once on a C of NaN; the worst error over |a||b| against float64 of the f16 inputs."""
        import numpy as np

        m, n, _k = self.shape
        self.device.queue.write_buffer(self.c, 0, np.full(m * n, np.nan, dtype=np.float32).tobytes())
        self.launch(pipeline, group, grid, 1)
        got = np.frombuffer(self.device.queue.read_buffer(self.c), dtype=np.float32).reshape(m, n)
        rows = np.random.default_rng(1).choice(m, size=min(m, 256), replace=False)
        a, b = self.a16[rows].astype(np.float64), self.b16.astype(np.float64)
        want, scale = a @ b, np.abs(a) @ np.abs(b)
        if not np.isfinite(got).all():
            return f"WRONG: {int((~np.isfinite(got)).sum())} elements unwritten or not finite"
        worst = float(np.max(np.abs(got[rows] - want) / scale))
        return f"ok (error/sum|ab| {worst:.1e})" if worst < 1e-5 else f"WRONG: error/sum|ab| {worst:.1e}"


def torch_rates(m: int, n: int, k: int) -> dict[str, tuple[float, float]]:
    """TFLOP/s of torch's f16 matmul and its fp32 one (TF32 off, on): (plain loop, CUDA graph)."""
    try:
        import torch
    except ImportError:
        return {}
    flops, rates = 2 * m * n * k, {}
    for label, dtype, tf32 in (("torch f16", torch.float16, False), ("torch fp32", torch.float32, False),
                               ("torch fp32+TF32", torch.float32, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.rand(m, k, device="cuda", dtype=dtype)
        b = torch.rand(k, n, device="cuda", dtype=dtype)
        out = torch.empty(m, n, device="cuda", dtype=dtype)
        for _ in range(3):
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
        reps = 20
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            torch.matmul(a, b, out=out)
        end.record()
        torch.cuda.synchronize()
        plain = start.elapsed_time(end) / 1e3 / reps
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            torch.matmul(a, b, out=out)
            with torch.cuda.graph(graph):
                for _ in range(reps):
                    torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        graphed = start.elapsed_time(end) / 1e3 / reps
        rates[label] = (flops / plain / 1e12, flops / graphed / 1e12)
    torch.backends.cuda.matmul.allow_tf32 = False
    return rates


def measure(shapes, variants) -> None:
    wgpu, adapter, device, configs, subgroup = open_device(null=False)
    print(f"{adapter.info.get('device')} ({adapter.info.get('backend_type')}), subgroup size {subgroup}, "
          f"{device.limits['max-compute-workgroup-storage-size']} bytes of workgroup storage; "
          f"configs {[(c['m'], c['n'], c['k'], c['component_type'], c['result_component_type']) for c in configs]}")
    convert = pipeline_for(device, CONVERT)
    for m, n, k in shapes:
        runner = Runner(wgpu, device, m, n, k)
        flops = 2 * m * n * k
        print(f"\n{m}x{n}x{k}: f16 A, B -> f32 C")
        best = 0.0
        for variant in variants:
            bm, bn = variant.block
            if m % bm or n % bn or k % variant.k_step:
                print(f"  {variant.name:26s} skipped: the shape is no multiple of its {bm}x{bn}x{variant.k_step} block")
                continue
            threads = variant.wm * variant.wn * subgroup
            if threads > adapter.limits["max-compute-invocations-per-workgroup"]:
                print(f"  {variant.name:26s} skipped: {threads} invocations")
                continue
            if variant.workgroup_bytes > device.limits["max-compute-workgroup-storage-size"]:
                print(f"  {variant.name:26s} skipped: {variant.workgroup_bytes} bytes of workgroup storage, over the "
                      f"device's {device.limits['max-compute-workgroup-storage-size']}")
                continue
            try:
                pipeline = pipeline_for(device, kernel(variant, subgroup))
                group = runner.bind(pipeline, (runner.a, runner.b, runner.c, runner.params))
                grid = (n // bn, m // bm)
                verdict = runner.check(pipeline, group, grid)
                seconds = runner.timed(pipeline, group, grid)
            except Exception as error:
                print(f"  {variant.name:26s} FAILED {str(error).splitlines()[0][:200]}")
                continue
            rate = flops / seconds / 1e12
            if verdict.startswith("ok"):
                best = max(best, rate)
            print(f"  {variant.name:26s} {rate:7.1f} TFLOP/s  {seconds * 1e6:9.1f} us  {verdict}")
        group = runner.bind(convert, (runner.a_src, runner.a, runner.count))
        copy_a = runner.timed(convert, group, (min(65535, -(-m * k // 256)), -(-m * k // (256 * 65535))))
        copies = copy_a * (1 + n / m)  # B's copy: K x N elements against A's M x K, the same kernel
        print(f"  f32 -> f16 copies of A and B: {copies * 1e6:.1f} us (A's measured, B's scaled by size)")
        if best:
            print(f"  best correct: {best:.1f} TFLOP/s on f16 inputs; "
                  f"{flops / (flops / best / 1e12 + copies) / 1e12:.1f} TFLOP/s for f32 inputs with the copies")
        try:
            baselines = torch_rates(m, n, k)
        except Exception as error:  # the figures above stand without them
            print(f"  torch: {type(error).__name__}: {str(error)[:200]}")
            baselines = {}
        for label, (plain, graphed) in baselines.items():
            print(f"  {label:16s} {plain:7.1f} TFLOP/s plain, {graphed:7.1f} under a CUDA graph"
                  + (f"; best correct / this: {best / plain:.0%} plain, {best / graphed:.0%} graph" if best else ""))


def shape_of(text: str) -> tuple[int, int, int]:
    m, n, k = (int(part) for part in text.lower().split("x"))
    return m, n, k


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", type=shape_of, help="MxNxK (repeatable)")
    parser.add_argument("--variants", default=":",
                        help="a slice of the variants, START:STOP (0:8 the first kernels, 8: the staged ones)")
    parser.add_argument("--compile-only", action="store_true", help="check the WGSL on Dawn's Null backend")
    parser.add_argument("--toggle", action="append", default=[],
                        help="another Dawn toggle to enable (repeatable), e.g. disable_robustness")
    options = parser.parse_args(argv)
    TOGGLES.extend(options.toggle)
    try:
        import wgpudawn  # noqa: F401
    except ImportError:
        print("wgpudawn is not installed")
        return 2
    if options.compile_only:
        # The Null backend is chosen when Dawn's instance starts: a child process of its own.
        env = dict(os.environ, WGPU_BACKEND_TYPE="Null")
        return subprocess.run([sys.executable, __file__, "--null-child"], env=env).returncode
    start, _, stop = options.variants.partition(":")
    variants = ALL[int(start) if start else None:int(stop) if stop else None]
    try:
        measure(options.shape or SHAPES, variants)
    except RuntimeError as error:  # no adapter: Dawn says why
        print(f"no device: {error}")
        return 2
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--null-child"]:
        sys.exit(compile_only())
    sys.exit(main())
