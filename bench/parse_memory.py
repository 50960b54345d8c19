"""Peak memory of parsing what is read from outside (issue 27 item 5, bounded parsing).

Each case is parsed in a fresh subprocess (so its peak RSS, Linux's ``VmHWM``, is that parse's alone,
with the interpreter's own ~30 MiB) under an address-space limit (``RLIMIT_AS``, 4 GiB by default) as a
guard: a parse that would need more fails there instead of taking the machine. Cases:

- ``bundle-200mb``: a valid bundle of ~200 MB (many entries), loaded as a program loads a bundle
  (``backends.local.load_bundle``: the size limit, then ``parse_json`` and ``read_bundle``);
  over :data:`~wgtune.store.bundle.BUNDLE_LIMIT` it is refused before it is read, so the same file is
  also parsed with the limit lifted (``parse_bundle(max_bytes=...)``) to show what reading it costs;
- ``bundle-limit``: a valid bundle just under the limit, loaded;
- ``one-string-64mib``: a bundle whose one field is a 64 MiB string (refused by the entry check,
  after the parse: what is measured is the parse);
- ``deep``: 16 MiB of arrays nested ``MAX_DEPTH`` levels deep, the deepest allowed, each holding a
  16-character string (parsed); the same with empty arrays, a list every two bytes, which ``json``
  would build at ~50 times the text (refused by ``CONTAINER_SPAN``, before the parse); and 19 MiB
  nested 10 million levels deep (refused by the depth scan, never given to ``json``);
- ``old-scan-8mib``: the depth scan this replaced (a regex over the whole text) on an 8 MiB string,
  for comparison: ~120 bytes per character.

Run: ``.venv/bin/python bench/parse_memory.py [--out bench/results/lavapipe-parse-memory.txt]``.
Each line: the case, the file's size, the child's peak RSS and its ratio to the size, the peak over
the RSS the child had after its imports (what the parse itself took) and its ratio, seconds, outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIB = 1024 * 1024
GUARD = 4 * 1024 * MIB
"""The address-space limit of each child: no case may take more than this."""


# -- the files -------------------------------------------------------------------------------------


def _entry(i: int) -> dict:
    return {
        "table": "matmul", "key": {"m": 64 + i % 4096, "n": i, "k": 256, "dtype": "f32"},
        "checksum": f"{i * 2654435761 % 2**64:016x}", "winner": i % 7, "winner_name": f"tile_{i % 7}x{16 + i % 3}",
        "policy": "default", "checked": bool(i % 2), "reports": 1 + i % 5,
        "confidence": {"runner_up": "tile_8x8", "ratio": 1.25, "low": 1.1, "high": 1.4, "p_faster": 0.99,
                       "level": 0.95, "samples": [16, 16]},
    }


def _namespace(n: int) -> dict:
    return {"wgtune": "0.1.0", "tuner": "default",
            "device": {"vendor": "mesa", "device": f"llvmpipe {n}", "backend": "vulkan"}}


def write_bundle(path: Path, size: int, namespaces: int = 4) -> None:
    """A valid bundle of about ``size`` bytes (a few hundred under), written as ``bundle_text``
    would (canonical JSON), its entries spread over ``namespaces`` devices."""
    tail = '],"wgtune":"0.1.0"}\n'
    with open(path, "w", encoding="utf-8") as out:
        written = out.write('{"built":"2026-12-01T02:30:00Z","format":"wgtune.bundle/1","namespaces":[')
        i = 0
        for n in range(namespaces):
            head = json.dumps(_namespace(n), sort_keys=True, separators=(",", ":"))
            written += out.write(("," if n else "") + head[:-1] + ',"entries":[')
            first, share = True, (size - len(tail) - 300) * (n + 1) // namespaces
            while True:
                text = ("" if first else ",") + json.dumps(_entry(i), sort_keys=True, separators=(",", ":"))
                if written + len(text) + 2 > share:
                    break
                written += out.write(text)
                first, i = False, i + 1
            written += out.write("]}")
        out.write(tail)


def write_one_string(path: Path, size: int) -> None:
    """A bundle of ``size`` bytes that is one namespace field's string: brackets, quotes and escapes
    (what the old scan spent ~120 bytes a character on)."""
    head = '{"built":"2026-12-01T02:30:00Z","format":"wgtune.bundle/1","namespaces":[{"device":"'
    tail = '","entries":[]}],"wgtune":"0.1.0"}\n'
    chars = size - len(head) - len(tail)
    body = ('ab[{\\"}]\\\\' * (chars // 10 + 1))[:chars]  # ten characters: ab, brackets, an escaped quote and backslash
    if (len(body) - len(body.rstrip("\\"))) % 2:  # an odd backslash at the end would escape the closing quote
        body = body[:-1] + "x"
    with open(path, "w", encoding="ascii") as out:
        out.write(head + body + tail)


def write_deep(path: Path, levels: int, size: int = 0, pad: int = 0) -> None:
    """A document nested ``levels`` deep: one array, or (``size``) an array of as many arrays nested
    ``levels - 1`` deep as make ``size`` bytes; ``pad``: each of them holding a string that long."""
    text = '"' + "x" * pad + '",' if pad else ""
    inner = ("[" + text) * (levels - 1) + "1" + "]" * (levels - 1)
    count = max(1, size // (len(inner) + 1))
    with open(path, "w", encoding="ascii") as out:
        out.write("[" + ",".join([inner] * count) + "]\n")


# -- the child ---------------------------------------------------------------------------------------


def child(mode: str, path: str) -> None:
    """Parse ``path`` as ``mode`` says, then print one JSON line: peak RSS, seconds, outcome."""
    resource.setrlimit(resource.RLIMIT_AS, (GUARD, GUARD))
    from wgtune.errors import StoreError
    from wgtune.store.bounded_json import parse_json
    from wgtune.store.bundle import parse_bundle

    if mode == "load":
        import wgtune.backends.local  # noqa: F401  (its imports are no part of the parse)
    base = _peak_rss()
    start = time.perf_counter()
    try:
        if mode == "load":
            from wgtune.backends.local import load_bundle

            outcome = f"{sum(len(entries) for _ns, entries in load_bundle(path))} entries"
        elif mode == "unlimited":
            documents = parse_bundle(Path(path).read_bytes(), max_bytes=2**40)
            outcome = f"{sum(len(entries) for _ns, entries in documents)} entries"
        elif mode == "parse":
            parse_json(Path(path).read_bytes())
            outcome = "parsed"
        elif mode == "old-scan":
            depth = _old_nesting_depth(Path(path).read_text(encoding="utf-8"))
            outcome = f"old scan: depth {depth}"
        else:
            raise SystemExit(f"no mode {mode!r}")
    except StoreError as error:
        outcome = f"StoreError: {str(error).replace(path + ': ', '')[:100]}"
    except MemoryError:
        outcome = f"MemoryError (over the {GUARD // MIB} MiB guard)"
    seconds = time.perf_counter() - start
    peak = _peak_rss()
    print(json.dumps({"peak": peak, "base": base, "seconds": seconds, "outcome": outcome}))


def _peak_rss() -> int:
    """This process's peak RSS in bytes: Linux's VmHWM (its own memory's high-water mark), else
    ``ru_maxrss``, which on Linux also keeps the parent's mark from before the exec (a vfork)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _old_nesting_depth(text: str) -> int:
    """The depth scan before issue 27 (a regex over the whole text), kept here to compare with."""
    import re
    from itertools import accumulate

    string = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
    not_bracket = re.compile(r"[^\[\]{}]+")
    step = str.maketrans({"[": "+", "{": "+", "]": "-", "}": "-"})
    brackets = not_bracket.sub("", string.sub("", text)) if "[" in text or "{" in text else ""
    if not brackets:
        return 0
    return max(accumulate(1 if mark == "+" else -1 for mark in brackets.translate(step)))


# -- the driver --------------------------------------------------------------------------------------


def measure(name: str, mode: str, path: Path) -> str:
    size = path.stat().st_size
    done = subprocess.run([sys.executable, __file__, "--child", mode, str(path)], capture_output=True, text=True,
                          timeout=900)
    if done.returncode:
        return f"{name:<26} {size / MIB:9.1f} MiB  child failed ({done.returncode}): {done.stderr.strip()[-200:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    peak, added = result["peak"], result["peak"] - result["base"]
    return (f"{name:<26} {size / MIB:7.1f} MiB  peak RSS {peak / MIB:7.1f} MiB ({peak / size:5.2f}x)  "
            f"over the imports {added / MIB:7.1f} MiB ({added / size:5.2f}x)  {result['seconds']:6.2f} s  "
            f"{result['outcome']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the figures to this file")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--bundle-mb", type=int, default=200, help="the large bundle's size in MB (default 200)")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    from wgtune.store.bounded_json import MAX_DEPTH
    from wgtune.store.bundle import BUNDLE_LIMIT

    lines = [f"# bench/parse_memory.py: {platform.python_implementation()} {platform.python_version()}, "
             f"{platform.machine()}, {os.cpu_count()} CPUs; each case in a fresh process, RLIMIT_AS "
             f"{GUARD // MIB} MiB; BUNDLE_LIMIT {BUNDLE_LIMIT // MIB} MiB, MAX_DEPTH {MAX_DEPTH}",
             "# case, file size, the child's peak RSS (and / file size), the peak over the RSS after imports "
             "(the parse's own, and / file size), seconds, outcome"]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory(prefix="wgtune-parse-memory-") as scratch:
        folder = Path(scratch)
        cases = []
        large = folder / "bundle-large.json"
        write_bundle(large, args.bundle_mb * 1000 * 1000)
        cases += [(f"bundle-{args.bundle_mb}mb load", "load", large),
                  (f"bundle-{args.bundle_mb}mb no limit", "unlimited", large)]
        at_limit = folder / "bundle-at-limit.json"
        write_bundle(at_limit, BUNDLE_LIMIT - 2 * MIB)
        cases.append(("bundle-at-limit load", "load", at_limit))
        one_string = folder / "one-string.json"
        write_one_string(one_string, 64 * MIB)
        cases.append(("one-string-64mib load", "load", one_string))
        deep = folder / "deep.json"
        write_deep(deep, MAX_DEPTH, 16 * MIB, pad=16)
        cases.append((f"deep-{MAX_DEPTH}-16mib parse", "parse", deep))
        dense = folder / "dense.json"
        write_deep(dense, MAX_DEPTH, 16 * MIB)
        cases.append((f"deep-{MAX_DEPTH}-16mib-dense", "parse", dense))
        deeper = folder / "deeper.json"
        write_deep(deeper, 10_000_000)
        cases.append(("deep-10M parse", "parse", deeper))
        old = folder / "old-scan.json"
        write_one_string(old, 8 * MIB)
        cases += [("one-string-8mib parse", "parse", old), ("one-string-8mib old scan", "old-scan", old)]
        for name, mode, path in cases:
            line = measure(name, mode, path)
            print(line, flush=True)
            lines.append(line)
            path_done = path not in [p for _n, _m, p in cases[cases.index((name, mode, path)) + 1:]]
            if path_done:
                path.unlink()
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
