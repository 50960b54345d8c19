"""How long the first tune in a fresh process takes, and what compiling pipelines together buys.

Two measurements, each side by side in one run, on the adapter in hand:

1. **Compiling a set's pipelines**: every candidate of the ``matmul`` set that fits the device,
   compiled on a fresh device one by one (``Device.compile``) and all at once
   (``Device.compile_many``: worker threads natively), each in a fresh process.
2. **The first tune in a fresh process**: a new Python process opens the device, makes one matmul
   call and times ``tuner.execute`` (cache off: a tune) with the compile threads at 1 (one pipeline
   after another, as before) and at the default (``wgtune.backends.wgpu_shim.COMPILE_THREADS``), and
   then a second tune of another key in the same process (pipelines already compiled).
   ``--isolate`` adds a tuner made as users make one (``open_tuner``: the default adapter, and the
   tuning process of ``backends/isolation.py``, whose start the first tune includes).

``--dawn`` does both on Dawn's device (``wgtune.backends.dawn``, wgpudawn installed): there
"all at once" is what the device's shim does with a set of compiles (since session 34, Dawn's own
workers through ``create_compute_pipeline_async``; before, 16 Python threads), so the pair of
lines says how much Dawn's compiles overlap.

The driver's own disk cache of compiled shaders is turned off in the children
(``__GL_SHADER_DISK_CACHE=0`` for NVIDIA, ``MESA_SHADER_CACHE_DISABLE=true`` for Mesa), so every
compile is cold; ``--warm`` leaves it on (what a user's second run of the day sees).

Usage: ``python bench/first_tune.py`` (small sizes, for lavapipe) or ``--full`` (the H200 sizes);
``--isolate``, ``--tunes-only``, ``--rounds N``.
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, struct, sys, time
started = time.perf_counter()
from wgtune import Args, Config, Tuner
from wgtune.backends.native import NativeDevice

try:  # the compile threads are the shim's since session 16 (a wheel from before: native's)
    from wgtune.backends import wgpu_shim as compiling
except ImportError:
    from wgtune.backends import native as compiling
from wgtune.gpu.device import check_limits
from wgtune.kernels.matmul import matmul_set
from wgtune.runner import run_inline

job = json.loads(sys.argv[1])
if job["threads"]:
    compiling.COMPILE_THREADS = job["threads"]
if job.get("isolate"):  # as a user opens one: the default adapter, the tuning process (isolation.py)
    from wgtune.backends.local import open_tuner
    tuner = open_tuner(config=Config(cache=False, log_level="disabled"), isolate=True)
    device = tuner.device
else:
    if job.get("dawn"):
        from wgtune.backends.dawn import DawnDevice
        device = DawnDevice.open()
    else:
        device = NativeDevice.open()
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled"))
opened = time.perf_counter()
tunables = matmul_set()
shim = type(getattr(device, "shim", None)).__name__  # Dawn's own since session 34
out = {"open": opened - started, "threads": compiling.COMPILE_THREADS, "shim": shim}
if job["what"] == "compile":
    kernels = [k for k in tunables.candidates if check_limits(k, device.limits, device.features) is None]
    begin = time.perf_counter()
    if job["together"]:
        failed = [c for c in run_inline(device.compile_many(kernels)) if isinstance(c, Exception)]
    else:
        failed = []
        for kernel in kernels:
            try:
                run_inline(device.compile(kernel))
            except Exception as error:
                failed.append(error)
    out.update(pipelines=len(kernels), failed=len(failed), seconds=time.perf_counter() - begin)
else:
    def call(m, n, k):
        a = device.create_buffer(size=4 * m * k)
        b = device.create_buffer(size=4 * k * n)
        c = device.create_buffer(size=4 * m * n)
        return Args((a, b, c), (m, n, k))
    tunes = []
    for shape in job["shapes"]:
        args = call(*shape)
        begin = time.perf_counter()
        kernel = tuner.execute(tunables, args)
        device.read_buffer_sync(args.buffers[2])
        tunes.append({"shape": shape, "seconds": time.perf_counter() - begin, "winner": kernel.name})
    out.update(tunes=tunes, compiled=len((tuner.guard._pipelines if tuner.guard else tuner.pipelines).compiled))
print("RESULT " + json.dumps(out))
"""


def child(job: dict, warm: bool) -> dict:
    env = dict(os.environ)
    if not warm:
        env.update(__GL_SHADER_DISK_CACHE="0", MESA_SHADER_CACHE_DISABLE="true")
    begin = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], env=env, capture_output=True, text=True,
                          timeout=900)
    wall = time.perf_counter() - begin
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"the child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(line[len("RESULT "):])
    result["process"] = wall
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the H200 sizes")
    parser.add_argument("--warm", action="store_true", help="leave the driver's shader disk cache on")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per configuration")
    parser.add_argument("--isolate", action="store_true",
                        help="also tune as open_tuner does by default: in the tuning process (isolation.py)")
    parser.add_argument("--tunes-only", action="store_true", help="skip the compile measurements")
    parser.add_argument("--dawn", action="store_true", help="on Dawn's device (wgpudawn), not wgpu-native's")
    options = parser.parse_args()
    if options.dawn and options.isolate:
        parser.error("--isolate runs the tuning process on wgpu-native's device: not with --dawn")
    shapes = [[4096, 4096, 4096], [2048, 2048, 2048]] if options.full else [[256, 256, 256], [128, 128, 128]]

    flags = "".join(f" --{flag}" for flag in ("full", "warm", "dawn") if getattr(options, flag))
    print(f"# python bench/first_tune.py{flags}: driver shader cache {'on' if options.warm else 'off'}"
          f"{', on Dawn' if options.dawn else ''}")
    if not options.tunes_only:
        print("compiling every matmul candidate that fits, in a fresh process:")
    for together in (False, True) * (not options.tunes_only):
        for _ in range(options.rounds):
            r = child({"what": "compile", "together": together, "threads": None, "dawn": options.dawn}, options.warm)
            way = "Dawn's workers" if r["shim"] == "DawnShim" else f"{r['threads']} threads"
            how = f"all at once ({r['shim']}, {way})" if together else "one by one"
            print(f"  {how:<40} {r['pipelines']} pipelines ({r['failed']} failed) in {r['seconds']:.2f} s")
    print(f"first tune in a fresh process (matmul {shapes[0]}), then a second key {shapes[1]} in the same process:")
    ways = [(1, False), (None, False)] + [(None, True)] * options.isolate
    for threads, isolate in ways:
        for _ in range(options.rounds):
            r = child({"what": "tune", "shapes": shapes, "threads": threads, "isolate": isolate, "dawn": options.dawn},
                      options.warm)
            first, second = r["tunes"]
            how = f"compile threads {r['threads']:>2}" + (", tuning process" if isolate else "")
            print(f"  {how}: first tune {first['seconds']:.2f} s ({first['winner']}), "
                  f"second {second['seconds']:.2f} s ({second['winner']}); {r['compiled']} pipelines compiled; "
                  f"{'open_tuner' if isolate else 'device open'} {r['open']:.2f} s, process {r['process']:.2f} s")


if __name__ == "__main__":
    main()
