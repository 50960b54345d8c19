"""The SQLite store at scale: writers storming one big cache, hits over a big cache, export/import memory.

Prints three figures (a benchmark, not a test):

1. **storm**: eight processes tune (for real, on the default adapter: two fma candidates, samples=3)
   distinct keys into one cache pre-filled with 100k entries; three are SIGKILLed mid-run. Every
   winner a process reported (surviving or killed) must be in the store afterwards. The storm's
   wall time against the same storm on an empty cache (target: no slower than 2x).
2. **all hits**: ``open_tuner`` and 10 hits (a fresh process) over a cache of 100k + 10 entries,
   against one of 10 entries (target: within 2x). The 10 winners are tuned for real; the 100k are
   written through the store (``executemany``, one transaction).
3. **memory**: peak RSS (VmHWM of a child process: Linux carries ``getrusage``'s maxrss across
   exec, so it would show the parent's) of ``wgtune cache export`` and
   ``import`` of a large cache (entries written through the store), against a child that only
   imports wgtune.

Run: ``python bench/store_scale.py [--entries 100000] [--big-entries 100000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WORKER_ENV = {"WGTUNE_SAMPLES": "3", "WGTUNE_WARMUPS": "1", "WGTUNE_LOG": "disabled", "WGTUNE_POLICY": "fixed"}


def _entry(i: int, results: int = 2, samples: int = 3):
    from wgtune import Key
    from wgtune.store.format import StoredEntry

    rows = tuple({"name": f"c{r}", "index": r, "median": 1e-3 + r * 1e-6,
                  "samples": [1e-3 + r * 1e-6 + s * 1e-9 for s in range(samples)]} for r in range(results))
    return StoredEntry("prefill", Key({"n": i, "dtype": "f32"}), "0" * 16, 0, "c0", rows)


def prefill(cache: Path, namespace: dict, count: int, results: int = 2, samples: int = 3) -> float:
    """``count`` entries written through the store in one transaction; the seconds it took."""
    from wgtune.backends.sqlite_store import CacheDatabase

    started = time.perf_counter()
    with CacheDatabase(cache) as database:
        database.save(namespace, (_entry(i, results, samples) for i in range(count)))
    return time.perf_counter() - started


# -- the child processes --------------------------------------------------------------------------


def _tiny_set(worker: int):
    from wgtune import TunableSet
    from wgtune.kernels.bandwidth import FMA_VARIANTS, fma_set

    plain = fma_set(FMA_VARIANTS[:2])
    return TunableSet(f"storm{worker}", plain.candidates, key=lambda args: {"n": args.params[0], "worker": worker})


def _call(device, n: int):
    from wgtune import Args

    data = bytes(4 * n)
    return Args((device.create_buffer(data), device.create_buffer(data), device.create_buffer(size=4 * n)), (n, 2.0))


def worker(cache: str, index: int, keys: int) -> None:
    """Tune ``keys`` distinct keys; print each winner as soon as the tuner reports it."""
    from wgtune.backends.local import open_tuner
    from wgtune.config import Config

    tuner = open_tuner(config=Config.from_env(cache_dir=cache))
    tunables = _tiny_set(index)
    for i in range(keys):
        call = _call(tuner.device, 64 * (i + 1))
        tuner.execute(tunables, call)
        key = tuner.key(tunables, call)
        print(json.dumps([tunables.name, key.to_json(), tuner.fastest(tunables, key).index]), flush=True)


def hits(cache: str, keys: int) -> None:
    """``open_tuner`` then ``keys`` calls: prints how many were hits and the seconds it took."""
    started = time.perf_counter()
    from wgtune.backends.local import open_tuner
    from wgtune.config import Config

    tuner = open_tuner(config=Config.from_env(cache_dir=cache))
    tunables = _tiny_set(-1)  # a set no storm process tunes
    tuned = []
    tuner.observer = lambda event: tuned.append(event) if type(event).__name__ == "TuneFinished" else None
    for i in range(keys):
        tuner.execute(tunables, _call(tuner.device, 64 * (i + 1)))
    print(json.dumps({"seconds": time.perf_counter() - started, "tuned": len(tuned)}))


def transfer(action: str, cache: str, file: str) -> None:
    """``wgtune cache export|import``; prints the child's peak RSS in MiB."""
    from wgtune.cli import main

    if action != "baseline":
        limit = ["--max-bytes", str(4 << 30)] if action == "import" else []
        assert main(["cache", "--cache-dir", cache, action, file, *limit]) == 0
    # Linux keeps ru_maxrss across exec (the forked parent's size would show), so the peak is
    # read from VmHWM, this process image's own high-water mark; maxrss where there is none.
    try:
        status = Path("/proc/self/status").read_text()
        peak_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    except (OSError, StopIteration):
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(peak_kib / 1024)


# -- the parent -----------------------------------------------------------------------------------


def _child(*args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, **WORKER_ENV}
    return subprocess.Popen([sys.executable, __file__, *args], env=env, text=True, **popen)


def _reader(process: subprocess.Popen, lines: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    thread.start()
    return thread


def storm(cache: Path, keys: int, namespace_of) -> tuple[float, int, int]:
    """Eight tuning processes, three killed after a third of their keys; (seconds, reported winners,
    reported winners missing from the store)."""
    started = time.perf_counter()
    processes = [_child("worker", str(cache), str(w), str(keys), stdout=subprocess.PIPE) for w in range(8)]
    lines: list[list[str]] = [[] for _ in processes]
    readers = [_reader(p, out) for p, out in zip(processes, lines, strict=True)]
    doomed = set(range(3))
    while doomed:
        for w in list(doomed):
            if len(lines[w]) >= keys // 3:
                os.kill(processes[w].pid, signal.SIGKILL)
                doomed.discard(w)
        time.sleep(0.01)
    for process, reader in zip(processes, readers, strict=True):
        process.wait()
        reader.join()
    seconds = time.perf_counter() - started
    from wgtune.backends.sqlite_store import SqliteStore

    stored = {(e.set_name, e.key.to_json()): e.winner for e in SqliteStore(cache, namespace_of()).load()}
    reported = [json.loads(line) for out in lines for line in out]
    missing = sum(stored.get((name, key)) != winner for name, key, winner in reported)
    return seconds, len(reported), missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000, help="entries pre-filled for the storm and the hits")
    parser.add_argument("--keys", type=int, default=24, help="keys each storm process tunes")
    parser.add_argument("--big-entries", type=int, default=100_000, help="entries of the exported cache")
    args = parser.parse_args()
    from wgtune.backends.native import NativeDevice
    from wgtune.store.format import namespace_for

    identity = NativeDevice.open().identity
    namespace = namespace_for(identity)
    print(f"device: {identity.device} ({identity.backend}); {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        filled = prefill(root / "full", namespace, args.entries)
        print(f"pre-filled {args.entries} entries through the store in {filled:.2f} s (one transaction)")

        print("\n1. storm: 8 processes tuning (real tunes: 2 fma candidates, fixed policy, 3 samples), 3 SIGKILLed")
        for name in ("empty", "full"):
            seconds, reported, missing = storm(root / name, args.keys, lambda: namespace)
            print(f"   {name:5} cache: {seconds:6.2f} s, {reported} winners reported, {missing} missing afterwards")
            if name == "empty":
                empty = seconds
        print(f"   full / empty: {seconds / empty:.2f}x (target <= 2x)")

        print("\n2. all hits: open_tuner + 10 calls in a fresh process (10 winners tuned for real)")
        small = root / "small"
        results = {}
        for name, cache in (("10 entries", small), (f"{args.entries} + 10 entries", root / "full")):
            first = json.loads(_child("hits", str(cache), "10", stdout=subprocess.PIPE).communicate()[0])
            runs = [json.loads(_child("hits", str(cache), "10", stdout=subprocess.PIPE).communicate()[0])
                    for _ in range(3)]
            assert first["tuned"] == 10 and all(run["tuned"] == 0 for run in runs), (first, runs)
            results[name] = min(run["seconds"] for run in runs)
            print(f"   {name:>16}: {results[name]:.2f} s (best of 3, all hits)")
        ratio = results[f"{args.entries} + 10 entries"] / results["10 entries"]
        print(f"   ratio: {ratio:.2f}x (target <= 2x)")

        print(f"\n3. memory: export and import of {args.big_entries} entries (16 results x 8 samples each, "
              "written through the store)")
        prefill(root / "big", namespace, args.big_entries, results=16, samples=8)
        exported = root / "export.json"
        for action, cache in (("baseline", root / "big"), ("export", root / "big"), ("import", root / "imported")):
            started = time.perf_counter()
            peak = float(_child(action, str(cache), str(exported), stdout=subprocess.PIPE).communicate()[0].split()[-1])
            size = f", file {exported.stat().st_size / 2**20:.0f} MiB" if action != "baseline" else ""
            print(f"   {action:8}: peak RSS {peak:6.0f} MiB, {time.perf_counter() - started:5.1f} s{size}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "hits":
        hits(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] in ("export", "import", "baseline"):
        transfer(sys.argv[1], sys.argv[2], sys.argv[3])
    else:
        main()
