"""Where a first tune's seconds go: each phase of a cold tune in a fresh process, timed.

A fresh process opens the device and tunes one matmul key (cache off, the driver's shader disk
cache off as in ``first_tune.py``), with the tuner's phases wrapped in timers: the screening and
the rounds, each candidate's preparation (compile, first launch, output check, calibration), the
compiles begun ahead, the samples, the buffer copies and comparisons. It prints each phase's
calls and seconds (inclusive: a preparation holds its compile), and the timeline of the
screening, candidate by candidate. The phases are the tuner's own functions, so the figures are
what a user's first ``execute`` spends; the wrappers cost microseconds.

Usage: ``python bench/tune_trace.py`` (256^3, for lavapipe) or ``--shape 4096x4096x4096``; ``--warm``
leaves the driver's shader cache on; ``--isolate`` tunes as ``open_tuner`` does, in the tuning process
(its start, the inputs' copies and the round trips timed too; ``--pipe``: the copies through the pipe,
not shared memory, as before session 37); ``--no-wake`` and ``--no-checks`` leave
out the wake and the output checks, to see what each costs the first tune. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import functools, inspect, json, sys, time
started = time.perf_counter()
from wgtune import Args, Config, Tuner
from wgtune.backends.native import NativeDevice
from wgtune.kernels.matmul import matmul_set
from wgtune.tune import adaptive, checks, measure, pipelines, tuning

totals, timeline, said = {}, [], []
def timed(owner, name, label, candidate=None):
    inner = getattr(owner, name, None)
    if inner is None:  # a wheel from before the phase (BEFORE= in device.sh): nothing to time
        return
    def note(begin, args):
        seconds = time.perf_counter() - begin
        calls, spent = totals.get(label, (0, 0.0))
        totals[label] = (calls + 1, spent + seconds)
        if candidate is not None:
            timeline.append((round(begin - started, 4), round(seconds, 4), label, candidate(args)))
    if inspect.iscoroutinefunction(inner):
        @functools.wraps(inner)
        async def wrapper(*args, **kwargs):
            begin = time.perf_counter()
            try:
                result = await inner(*args, **kwargs)
                if label == "wake the GPU" and result is not None:  # what the wake did: its readings' story
                    said.append(f"{label}: {result.describe()}")
                return result
            finally:
                note(begin, args)
    else:
        @functools.wraps(inner)
        def wrapper(*args, **kwargs):
            begin = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                note(begin, args)
    setattr(owner, name, wrapper)

name_of = lambda args: args[0].tunables.candidates[args[1]].name
timed(adaptive, "prepare_candidate", "prepare a candidate", name_of)
timed(measure, "probe_first_launch", "first launch", lambda args: args[1].name)
timed(measure, "calibrate", "calibrate")
timed(measure.Arm, "sample", "samples", lambda args: args[0].name)
timed(checks.OutputCheck, "mismatch", "check outputs")
timed(checks.OutputCheck, "fresh_args", "check: fresh copies")
timed(checks.OutputCheck, "judge_all", "check: judge all")
timed(pipelines.PipelineCache, "compile_ahead", "compile ahead (together)", lambda args: len(args[2]))
timed(pipelines.PipelineCache, "compile", "compile (or take compiled)")
timed(adaptive.AdaptiveSampler, "screen", "screening")
timed(adaptive.AdaptiveSampler, "rounds", "rounds")
# What comes before the screening (session 36's H100 trace: 1.2-1.6 s in process), each in the timeline.
before = lambda args: "(before the screening)"
timed(tuning, "load", "load the GPU ahead", before)
timed(tuning, "wake", "wake the GPU", before)
timed(tuning, "clock_grain", "read the clock's grain", before)
timed(tuning, "_reflect", "reflect the WGSL", before)
timed(tuning, "clone_written", "copy the written inputs", before)
timed(tuning, "OutputCheck", "set up the checks", before)

job = json.loads(sys.argv[1])
config = Config(cache=False, log_level="disabled", **job["settings"])
if job["isolate"]:  # as open_tuner makes a tuner: its launches in the tuning process
    from wgtune.backends import worker_link
    from wgtune.backends.local import open_tuner
    from wgtune.backends.remote_device import RemoteDevice
    if job["pipe"]:  # the inputs' copies through the pipe, as before session 37's shared memory
        worker_link.CAN_SHARE = False
    timed(RemoteDevice, "__init__", "tuning process: start (what is left)")
    timed(RemoteDevice, "adopt", "tuning process: inputs copied")
    timed(RemoteDevice, "_call", "tuning process: round trips")
    tuner = open_tuner(config=config, isolate=True)
    device = tuner.device
else:
    device = NativeDevice.open()
    tuner = Tuner(device, config=config)
opened = time.perf_counter()
for label in ("clone_buffer", "compare_buffers", "sync", "read_buffer_sync"):
    for kind in [type(device)] + ([RemoteDevice] if job["isolate"] else []):
        if hasattr(kind, label):
            timed(kind, label, f"{kind.__name__}.{label}")
m, n, k = job["shape"]
buffers = tuple(device.create_buffer(size=4 * count) for count in (m * k, k * n, m * n))
begin = time.perf_counter()
kernel = tuner.execute(matmul_set(), Args(buffers, (m, n, k)))
device.read_buffer_sync(buffers[2])
out = {"open": opened - started, "tune": time.perf_counter() - begin, "winner": kernel.name,
       "compiled": len((tuner.guard._pipelines if tuner.guard else tuner.pipelines).compiled),
       "totals": totals, "timeline": timeline, "start": begin - started, "said": said}
print("RESULT " + json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="256x256x256", help="MxNxK of the matmul key")
    parser.add_argument("--warm", action="store_true", help="leave the driver's shader disk cache on")
    parser.add_argument("--isolate", action="store_true", help="tune as open_tuner does: in the tuning process")
    parser.add_argument("--no-wake", action="store_true", help="no wake before the tune (Config.wake 0)")
    parser.add_argument("--no-checks", action="store_true", help="no output checks (Config.checks off)")
    parser.add_argument("--pipe", action="store_true", help="with --isolate: the inputs' copies through the pipe, "
                        "not shared memory")
    options = parser.parse_args()
    if options.pipe and not options.isolate:
        parser.error("--pipe is the tuning process's: give --isolate too")
    shape = [int(part) for part in options.shape.split("x")]
    env = dict(os.environ)
    if not options.warm:
        env.update(__GL_SHADER_DISK_CACHE="0", MESA_SHADER_CACHE_DISABLE="true")
    settings = {**({"wake": 0.0} if options.no_wake else {}), **({"checks": False} if options.no_checks else {})}
    job = json.dumps({"shape": shape, "isolate": options.isolate, "pipe": options.pipe, "settings": settings})
    done = subprocess.run([sys.executable, "-c", CHILD, job], env=env, capture_output=True, text=True, timeout=900)
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"the child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    r = json.loads(line[len("RESULT "):])
    flags = "".join(f" --{name}" for name in ("warm", "isolate", "no-wake", "no-checks", "pipe")
                    if getattr(options, name.replace("-", "_")))
    print(f"# python bench/tune_trace.py --shape {options.shape}{flags}")
    print(f"first tune of matmul {shape}: {r['tune']:.3f} s, {r['compiled']} pipelines compiled, winner "
          f"{r['winner']} ({'open_tuner' if options.isolate else 'device open'} {r['open']:.2f} s before it, "
          "not counted)")
    for line in r.get("said", []):
        print(line)
    print("phase (inclusive; nested phases are inside their parents):")
    for label, (calls, seconds) in sorted(r["totals"].items(), key=lambda item: -item[1][1]):
        print(f"  {label:<28} {calls:>5} calls {seconds:8.3f} s")
    print("timeline (seconds from the tune's start, seconds spent, phase, candidate):")
    for at, seconds, label, what in r["timeline"]:
        print(f"  {at - r['start']:7.3f} {seconds:7.3f}  {label:<26} {what}")


if __name__ == "__main__":
    main()
