"""What the tuning process costs: the demo catalogue tuned in process and in a tuning process.

Each round tunes every key of the demo suite (what ``wgtune tune`` tunes) twice, each time in a
fresh Python process with nothing stored: once with ``isolate=False`` (every launch in process)
and once with the tuning process (``isolate=True``, the default: ``backends/isolation.py``),
in alternating order so that a machine's drift hits both alike; each key is tuned and then
called, as ``wgtune tune`` calls it (the winner runs in the tuner's process). It prints, per way,
the total time (the median and each round's), the first key's (which starts the tuning
process), the rest, the time spent compiling in the tuner's own process (with the tuning
process: its winners, which run here), the time to start the process, how many calls waited for
it, and how many keys picked the same winner from round to round, each way and across the two (how far the
device's timings repeat).

    python bench/isolation_cost.py [--rounds 3] [--out FILE]

Runs from an installed wheel too (it imports only ``wgtune``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def tune_catalogue(isolate: bool) -> dict:
    """Tune the demo suite in this process; its timings and winners."""
    from wgtune import Config
    from wgtune.backends import remote_device
    from wgtune.backends.local import open_tuner
    from wgtune.backends.native import NativeDevice
    from wgtune.kernels.demo import demo_suite

    calls = [0]
    starts: list[float] = []
    call, init = remote_device.RemoteDevice._call, remote_device.RemoteDevice.__init__

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return call(self, *args, **kwargs)

    def timed_init(self, *args, **kwargs):
        began = time.perf_counter()
        init(self, *args, **kwargs)
        starts.append(time.perf_counter() - began)

    remote_device.RemoteDevice._call = counted
    remote_device.RemoteDevice.__init__ = timed_init
    compiling = [0.0]  # seconds compiling on the tuner's own device (with the process: the winners only)
    for name in ("compile", "compile_many"):
        method = getattr(NativeDevice, name)

        async def timed(self, *args, _method=method, **kwargs):
            began = time.perf_counter()
            try:
                return await _method(self, *args, **kwargs)
            finally:
                compiling[0] += time.perf_counter() - began

        setattr(NativeDevice, name, timed)
    tuner = open_tuner(config=Config(cache=False, log_level="disabled"), isolate=isolate)
    keys, winners = [], {}
    began = time.perf_counter()
    for case in demo_suite():
        for size in case.sizes:
            args = case.make_args(tuner.device, size)
            key = tuner.key(case.tunables, args)
            tuned = time.perf_counter()
            state = tuner.check_tune(case.tunables, key, args)
            tuner.execute(case.tunables, args)  # the call, as `wgtune tune` makes it: the winner runs here
            tuner.device.read_buffer_sync(args.buffers[0])
            keys.append(time.perf_counter() - tuned)
            winners[f"{case.tunables.name} {key}"] = case.tunables.candidates[state.index].name
    total = time.perf_counter() - began
    return {"device": tuner.device.identity.device, "total": total, "keys": keys, "starts": starts,
            "calls": calls[0], "winners": winners, "compiling": compiling[0]}


def child(isolate: bool) -> dict:
    command = [sys.executable, __file__, "--child", "1" if isolate else "0"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(runs: dict[bool, list[dict]]) -> str:
    device = runs[False][0]["device"]
    lines = [f"demo catalogue tuned with nothing stored, {len(runs[False])} rounds, on {device}", "",
             "| way | total: median (rounds) | first key | other keys | compiling here | process starts "
             "| calls to it |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for isolate, label in ((False, "in process"), (True, "tuning process")):
        rounds = runs[isolate]
        totals = [run["total"] for run in rounds]
        first = statistics.median(run["keys"][0] for run in rounds)
        rest = statistics.median(sum(run["keys"][1:]) for run in rounds)
        starts = [seconds for run in rounds for seconds in run["starts"]]
        started = f"{len(starts) // len(rounds)}, {statistics.median(starts):.2f} s each" if starts else "none"
        compiling = statistics.median(run["compiling"] for run in rounds)
        each = ", ".join(f"{total:.1f}" for total in totals)
        lines.append(f"| {label} | {statistics.median(totals):.2f} s ({each}) | {first:.2f} s | "
                     f"{rest:.2f} s | {compiling:.2f} s | {started} | "
                     f"{statistics.median(run['calls'] for run in rounds):.0f} |")
    keys = len(runs[False][0]["keys"])
    ratio = statistics.median(run["total"] for run in runs[True]) / statistics.median(
        run["total"] for run in runs[False])
    lines += ["", f"{keys} keys; the tuning process takes {ratio:.2f}x the time in process",
              "same winner, keys of rounds compared pairwise (mean): "
              f"in process with in process {agreement(runs[False], runs[False]):.1f}, tuning process with "
              f"tuning process {agreement(runs[True], runs[True]):.1f}, across the two "
              f"{agreement(runs[False], runs[True]):.1f} of {keys}"]
    return "\n".join(lines)


def agreement(these: list[dict], those: list[dict]) -> float:
    """How many keys picked the same winner, on average over pairs of distinct rounds."""
    pairs = [(a, b) for i, a in enumerate(these) for j, b in enumerate(those) if these is not those or i < j]
    if not pairs:
        return float("nan")
    return statistics.mean(sum(a["winners"][key] == b["winners"].get(key) for key in a["winners"]) for a, b in pairs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="also write the figures to this file")
    parser.add_argument("--child", choices=("0", "1"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(tune_catalogue(args.child == "1")))
        return 0
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for round_ in range(args.rounds):
        for isolate in ((False, True) if round_ % 2 == 0 else (True, False)):
            runs[isolate].append(child(isolate))
            print(f"round {round_ + 1}, {'tuning process' if isolate else 'in process'}: "
                  f"{runs[isolate][-1]['total']:.2f} s", file=sys.stderr)
    text = report(runs)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
