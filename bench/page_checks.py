"""``bench/fresh_checks.py`` in the page: every built-in candidate on fresh shapes, as a browser runs it.

Natively the WGSL goes through naga to the driver; in a page Chromium compiles it with Tint and runs
it on its own WebGPU (SwiftShader here), with its own rules for an index out of bounds and its own
limits. A candidate right under one may be wrong or refused under the other, and a tune in the page
would pay for its compile and check to find that out. So this serves the page (``wgtune serve``),
opens it in headless Chromium, and in the page's Python, on the page's device, runs every
candidate each shape's key plans and the device fits (launched as a call is, WebGPU's refusals
awaited), once, on an output filled with NaN, comparing it with the family's own reference
(``Family.reference``: pure Python, as the page has no numpy) under the core's rule
(``comparison.compare_bytes``, the set's tolerance). The shapes are drawn as ``fresh_checks.py``
draws them (seeded and printed), within ``--work``, kept small: SwiftShader runs on the CPU and
the references are pure Python. Matmul's shapes are drawn larger (``--matmul-work``), and as
many again with M and N of 257-2048, so that keys of the medium and large classes plan the large
tiles and the browser's split-K: their
exact products come from the host (numpy, in float64, on the very inputs the family's
``make_args`` seeds in the page), as the page's pure Python would take minutes for each.

Printed: a line per shape, every wrong, failed or refused candidate with why, and a summary; the
exit status is 1 when any candidate is wrong or failed.

Usage: ``python bench/page_checks.py [--seed S] [--count N] [--only FAMILY] [--work W]``
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
import fresh_checks  # bench/fresh_checks.py: the draws
import numpy as np
from harness import PageServer, launch, open_page  # e2e/harness.py
from held_out import fresh_seed, log_uniform  # bench/held_out.py
from run_info import report_to  # bench/run_info.py

from kernels import RecordingDevice  # bench/kernels.py
from wgtune.kernels.families import family_named

__all__ = ["IN_PAGE", "main"]

WORK = 3e5  # 16 x the elements at most: pure-Python references, CPU WebGPU
MATMUL_WORK = 2e7  # M*N*K at most: the products come from the host
BINDING = 128 << 20  # WebGPU's default storage binding limit: the draws stay far below it anyway

# Runs in the page's Pyodide (``runPythonAsync``) with ``SHAPES`` set: family name -> list of
# ``[size, want]``, ``want`` the exact output's bytes in base64 (None: the family's reference).
IN_PAGE = r"""
import base64, json, struct, time
from js import window
from wgtune.errors import LaunchRefused
from wgtune.gpu.comparison import compare_bytes
from wgtune.gpu.device import check_limits
from wgtune.kernels.families import family_named
from wgtune.tune.plan import Plan

device = window.wgtune.session.device
shapes = json.loads(SHAPES)
rows = []
pipelines = {}
for name, sizes in shapes.items():
    family = family_named(name)
    tunables = family.build()
    code = "e" if family.element == "f16" else "f"
    width = struct.calcsize(code)
    for size, given in sizes:
        began = time.perf_counter()
        args = family.make_args(device, tuple(size))
        if given is not None:
            want = base64.b64decode(given)
        else:
            inputs = []
            for slot, buffer in enumerate(args.buffers):
                if slot not in tunables.outputs:
                    data = await device.read_buffer(buffer)
                    inputs.append(struct.unpack(f"<{len(data) // width}{code}", data))
            want_values = family.reference(inputs, args.params)
            want = struct.pack(f"<{len(want_values)}{code}", *want_values)
        typecode, atol, rtol = tunables.tolerances_for(args)[0]
        out = tunables.outputs[0]
        poison = device.create_buffer(b"\xff" * args.buffers[out].size)
        skipped = Plan(tunables.candidates, tunables.key(args)).skipped
        row = {"shape": f"{name} {'x'.join(map(str, size))}", "right": 0, "wrong": {}, "failed": {}, "refused": {},
               "skipped": 0, "unfit": None}
        for index, kernel in enumerate(tunables.candidates):
            unfit = None if index in skipped else check_limits(kernel, device.limits, device.features)
            if index in skipped or unfit:
                row["skipped"] += 1
                row["unfit"] = row["unfit"] or (unfit and f"{kernel.name}: {unfit}")
                continue
            output = device.clone_buffer(poison)
            call = args.with_buffers([output if slot == out else b for slot, b in enumerate(args.buffers)])
            try:
                fingerprint = kernel.fingerprint()
                if fingerprint not in pipelines:
                    pipelines[fingerprint] = await device.compile(kernel)
                device.launch(pipelines[fingerprint], call, tuple(kernel.grid(args)))
                scope = device.take_launch_scope(call)
                if scope is not None:
                    await scope
                got = await device.read_buffer(output)
            except LaunchRefused as refusal:
                row["refused"][kernel.name] = str(refusal)[:400]
                continue
            except Exception as error:
                row["failed"][kernel.name] = f"{type(error).__name__}: {str(error)[:400]}"
                continue
            finally:
                output.destroy()
            found = compare_bytes(got, want, code, atol, rtol)
            if found.agree:
                row["right"] += 1
            else:
                row["wrong"][kernel.name] = found.describe()
        poison.destroy()
        row["seconds"] = time.perf_counter() - began
        rows.append(row)
json.dumps({"rows": rows, "pipelines": len(pipelines)})
"""


def matmul_expected(name: str, size: tuple[int, ...]) -> str:
    """The exact product of ``name``'s call of ``size`` (``matmul`` or ``matmul_f16``) on the inputs
    its ``make_args`` seeds, as the page's output buffer would hold it, in base64."""
    family = family_named(name)
    recorder = RecordingDevice()
    args = family.make_args(recorder, size)
    m, n, k = args.params[:3]
    dtype = np.float16 if family.element == "f16" else np.float32
    a, b = (np.frombuffer(recorder.data[args.buffers[slot]], dtype) for slot in (0, 1))
    product = a[: m * k].reshape(m, k).astype(np.float64) @ b[: k * n].reshape(k, n).astype(np.float64)
    return base64.b64encode(product.astype(dtype).tobytes()).decode()


def medium_matmuls(count: int, seed: int, work: float) -> list[tuple[int, int, int]]:
    """``count`` distinct matmul shapes with M and N of 257-2048 (keys of the medium and large
    classes, which plan the large tiles) and M*N*K within ``work``, from ``seed``."""
    rng = random.Random(f"medium:{seed}")
    found: list[tuple[int, int, int]] = []
    least = 257 * 257
    for _ in range(1000 * count):
        if len(found) == count or work < least:
            break
        k = log_uniform(rng, 1, min(work // least, 65536))  # K first: long ones as likely as short ones
        m = log_uniform(rng, 257, min(2048, work // (k * 257)))
        n = log_uniform(rng, 257, min(2048, work // (k * m)))
        if m * n * k <= work and (m, n, k) not in found:  # n at its least (257) may pass the work
            found.append((m, n, k))
    if len(found) < count:
        raise RuntimeError(f"drew only {len(found)} of {count} medium matmul shapes within work {work:g}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, help="draw these shapes again (default: a fresh seed, printed)")
    parser.add_argument("--count", type=int, default=6, help="shapes a family (default 6)")
    parser.add_argument("--only", action="append", choices=list(fresh_checks.FAMILIES), help="only this family")
    parser.add_argument("--work", type=float, default=WORK,
                        help=f"the most work a shape: 16 x its elements (default {WORK:g})")
    parser.add_argument("--matmul-work", type=float, default=MATMUL_WORK,
                        help=f"the most work a matmul shape: M*N*K (default {MATMUL_WORK:g})")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    options = parser.parse_args(argv)
    if min(options.count, options.work, options.matmul_work) < 1:
        parser.error("--count, --work and --matmul-work must be at least 1")
    seed = options.seed if options.seed is not None else fresh_seed()
    families = options.only or list(fresh_checks.FAMILIES)
    shapes = {}
    for name in families:
        matmul = name.startswith("matmul")
        sizes = fresh_checks.draw(name, options.count, seed, options.matmul_work if matmul else options.work, BINDING)
        if matmul:  # as many again of the medium and large classes, which log-uniform sides seldom reach
            sizes += medium_matmuls(options.count, seed, options.matmul_work)
        shapes[name] = [[size, matmul_expected(name, size) if matmul else None] for size in sizes]
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    with PageServer() as server, sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = launch(playwright, Path(profile))
        try:
            page, log = open_page(context, server.url)
            found = json.loads(page.evaluate(
                "([code, shapes]) => window.wgtune.pyodide.runPythonAsync(code,"
                " {globals: window.wgtune.pyodide.toPy({SHAPES: shapes})})",
                [IN_PAGE, json.dumps(shapes)]))
            info = page.evaluate("window.wgtune.adapterInfo")
            browser = page.evaluate("navigator.userAgent.match(/Chrome\\/[\\d.]+/)?.[0] ?? navigator.userAgent")
            errors = list(log.errors)
        finally:
            context.close()
    adapter = {"device": " ".join(filter(None, (info.get("vendor"), info.get("architecture"), info.get("device")))),
               "backend_type": f"WebGPU in {browser}", "description": info.get("description") or "no description"}
    totals = {"right": 0, "wrong": 0, "failed": 0, "refused": 0}
    with report_to(options.out, adapter, argv) as report:
        report.line(f"seed {seed} (--seed {seed} draws these shapes again); {options.count} shapes a family (twice "
                    f"as many matmuls: M and N of 257-2048 for the second half), work "
                    f"at most {options.work:g} (matmul {options.matmul_work:g}); in the page, Chromium's WebGPU")
        for row in found["rows"]:
            ran = row["right"] + len(row["wrong"]) + len(row["failed"])
            refused = f", {len(row['refused'])} refused" if row["refused"] else ""
            report.line(f"{row['shape']:28} {row['right']}/{ran} right{refused}, {row['skipped']} not planned or "
                        f"not fitting  ({row['seconds']:.1f} s)")
            if not ran and not row["refused"] and row["unfit"]:
                report.line(f"  no candidate fits this device, e.g. {row['unfit']}")
            for kind in ("wrong", "failed", "refused"):
                for name, why in row[kind].items():
                    report.line(f"  {kind.upper()} {name}: {why}")
                totals[kind] += len(row[kind])
            totals["right"] += row["right"]
        report.line(f"{len(found['rows'])} shapes: {totals['right']} right, {totals['wrong']} wrong, "
                    f"{totals['failed']} failed, {totals['refused']} refused; {found['pipelines']} pipelines "
                    f"compiled in the page; {time.perf_counter() - started:.0f} s with the page's load")
        for error in errors:
            report.line(f"page console error: {error}")
    return 1 if totals["wrong"] or totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
