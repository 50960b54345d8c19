"""Driving the page for the end-to-end tests and the page benchmark: the server and the browser.

``PageServer`` runs ``wgtune serve --port 0`` in a subprocess (the command a user runs) and
reads the URL it prints. ``launch`` starts Debian's Chromium through Playwright: headless, with
WebGPU (``--enable-unsafe-webgpu``; SwiftShader where there is no GPU), in a profile directory of
its own so IndexedDB lives across a page reload and across a browser restart. Chromium's own log
(every process's stderr) goes to ``wgtune-chromium.log`` in the profile directory, and
``crash_evidence`` gives its tail and the crash dumps written since, for a test whose tab crashed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("WGTUNE_CHROMIUM", "/usr/bin/chromium")
# Chromium's own defaults otherwise, as a user's Chrome has them: GWP-ASan (the sampling allocator
# Chromium turns on in 1% of its processes) included. Its stack walks crashed the page's tab when
# Python ran on Pyodide's JSPI stacks; the page keeps Python off them (web/python.js
# withStackSwitching), and e2e/test_harness_crash.py loads it with GWP-ASan forced on.
CHROMIUM_ARGS = [
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
    "--use-angle=swiftshader",
    # This machine's network is closed: Chromium's own background traffic only makes noise.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
if hasattr(os, "geteuid") and os.geteuid() == 0:
    CHROMIUM_ARGS.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
# A guard against a page that never loads, not a margin: a first visit builds Python's snapshot in a
# worker, which took 47 s of a 70 s load here with the load average at 12 (CI beside other jobs).
READY_TIMEOUT_MS = 240_000


class PageServer:
    """``wgtune serve`` on a free port of 127.0.0.1, for the length of a ``with`` block."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.url = ""
        self.output: list[str] = []

    def __enter__(self) -> PageServer:
        command = [sys.executable, "-c", "from wgtune.cli import main; raise SystemExit(main())",
                   "serve", "--port", "0"]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
        for line in self.process.stdout:
            self.output.append(line)
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if found:
                self.url = found.group(0)
                break
        if not self.url:
            self.process.wait(timeout=10)
            raise RuntimeError("wgtune serve did not start:\n" + "".join(self.output))
        # Keep draining its output so it never blocks on a full pipe.
        self._drain = threading.Thread(target=lambda: self.output.extend(self.process.stdout), daemon=True)
        self._drain.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self._drain.join(timeout=5)  # it ends at the output's end, now the server has exited
            self.process.stdout.close()


# Every process's stderr, where a dying renderer or GPU process writes its last words (a V8
# "Fatal process out of memory", a CHECK), INFO and up.
LOGGING_ARGS = ["--enable-logging=stderr", "--log-level=0"]
# Playwright keeps the browser's stderr to itself: a shell in between sends it to a file.
_WRAPPER = '#!/bin/sh\nexec "$WGTUNE_CHROMIUM" "$@" 2>>"$WGTUNE_CHROMIUM_LOG"\n'
# Crashpad's reports, which Debian's Chromium writes whatever the profile (Playwright's
# --disable-breakpad does not stop them).
CRASH_REPORTS = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "chromium" / "Crash Reports"
LOGS: list[Path] = []  # every Chromium log of this process, the latest last
_STARTED = time.time()


def chromium_log(profile: Path) -> Path:
    """Where the Chromium on ``profile`` writes its log (appended to across relaunches): in the
    profile, which Chromium does not mind, so that it goes with a temporary profile."""
    return Path(profile) / "wgtune-chromium.log"


def _wrapper() -> Path:
    path = Path(tempfile.gettempdir()) / f"wgtune-chromium-{os.getuid()}.sh"
    if not path.exists() or path.read_text() != _WRAPPER:
        spare = path.with_suffix(f".{os.getpid()}")
        spare.write_text(_WRAPPER)
        spare.chmod(0o755)
        spare.replace(path)
    return path


def launch(playwright: Any, profile: Path, args: list[str] | None = None) -> Any:
    """A Chromium with WebGPU on the profile directory ``profile`` (a persistent context);
    ``args`` in place of ``CHROMIUM_ARGS`` (the benchmark compares flags)."""
    log = chromium_log(profile)
    log.parent.mkdir(parents=True, exist_ok=True)
    if log not in LOGS:
        LOGS.append(log)
    with log.open("a") as out:
        out.write(f"--- wgtune: launched at {time.strftime('%H:%M:%S')} on {profile}\n")
    environment = {**os.environ, "WGTUNE_CHROMIUM": CHROMIUM, "WGTUNE_CHROMIUM_LOG": str(log)}
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=str(_wrapper()), headless=True, env=environment,
        args=(CHROMIUM_ARGS if args is None else args) + LOGGING_ARGS, viewport={"width": 1280, "height": 1000},
    )


def crash_dumps(since: float) -> list[Path]:
    """The crash dumps Crashpad finished since ``since``, the latest last (it writes each in new/
    and moves it to pending/ once whole)."""
    dumps = [*CRASH_REPORTS.glob("pending/*.dmp"), *CRASH_REPORTS.glob("completed/*.dmp")]
    return sorted((dump for dump in dumps if dump.stat().st_mtime >= since), key=lambda dump: dump.stat().st_mtime)


def crash_evidence(since: float = _STARTED, lines: int = 60) -> str:
    """What Chromium left about a crash: each crash dump written since ``since`` (summarized:
    the signal, the thread, the faulting address beside that thread's stack) and the last
    ``lines`` lines of the latest two logs written to since."""
    parts = [f"crash dump {dump}: {describe_dump(dump.read_bytes())}" for dump in crash_dumps(since)]
    if not parts:
        parts.append(f"no crash dump in {CRASH_REPORTS} since {time.strftime('%H:%M:%S', time.localtime(since))}")
    for log in [log for log in LOGS if log.exists() and log.stat().st_mtime >= since][-2:]:
        if lines:
            # D-Bus, absent here, fills a log with the same complaints at every start.
            kept = [line for line in log.read_text(errors="replace").splitlines() if "ERROR:dbus/" not in line]
            tail = kept[-lines:]
            parts.append(f"last {len(tail)} lines of {log}:\n" + "\n".join(tail))
    return "\n".join(parts)


SIGNALS = {4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV"}


def describe_dump(data: bytes) -> str:
    """A minidump's crash in one line: the process type, the signal and its code, the crashing
    thread's name, the faulting address and where it lies against that thread's stack."""
    import struct

    def string(rva: int) -> str:
        (length,) = struct.unpack_from("<I", data, rva)
        return data[rva + 4:rva + 4 + length].decode("utf-16-le", "replace")

    try:
        count, directory = struct.unpack_from("<II", data, 8)
        streams = {}
        for index in range(count):
            kind, _, rva = struct.unpack_from("<III", data, directory + 12 * index)
            streams.setdefault(kind, rva)
        thread, signal, code, address = struct.unpack_from("<I4xIIxxxxxxxxQ", data, streams[6])
        names = {}
        if 24 in streams:  # thread names
            (threads,) = struct.unpack_from("<I", data, streams[24])
            for index in range(threads):
                tid, rva = struct.unpack_from("<IQ", data, streams[24] + 4 + 12 * index)
                names[tid] = string(rva)
        where = ""
        (threads,) = struct.unpack_from("<I", data, streams[3])
        for index in range(threads):
            tid, start, size = struct.unpack_from("<I20xQI", data, streams[3] + 4 + 48 * index)
            if tid == thread and start <= address <= start + size + 4096:
                where = f", {address - start - size:+d} bytes past the end of its stack (captured from {start:#x})"
        kind = re.search(rb"ptype\x00+.{0,8}?([a-z-]+)", data, re.S) or re.search(rb"--type=([a-z-]+)", data)
        process = kind.group(1).decode() if kind else "browser?"
        return (f"{process} process, {SIGNALS.get(signal, signal)} code {code} at {address:#x} on thread "
                f"{names.get(thread, thread)!r}{where}")
    except (KeyError, struct.error) as error:
        return f"not a minidump this can read ({error})"


class ConsoleLog:
    """Every console message, page error and request of one page: to assert there were no errors
    and that the page fetched nothing from outside its own server."""

    def __init__(self, page: Any) -> None:
        self.messages: list[tuple[str, str]] = []
        self.requests: list[str] = []
        page.on("console", lambda message: self.messages.append((message.type, message.text)))
        page.on("pageerror", lambda error: self.messages.append(("pageerror", str(error))))
        page.on("crash", lambda _: self.messages.append(("crash", f"the tab crashed at {time.strftime('%H:%M:%S')}")))
        page.on("request", lambda request: self.requests.append(request.url))

    @property
    def errors(self) -> list[str]:
        return [text for kind, text in self.messages if kind in ("error", "pageerror", "crash")]


def open_page(context: Any, url: str, query: str = "", *, wait: bool = True) -> tuple[Any, ConsoleLog]:
    """A new tab on the page with its console log; once ``window.wgtune.ready`` resolved, if ``wait``."""
    page, log = _new_tab(context, url + query)
    if wait:
        wait_ready(page)
    return page, log


def _new_tab(context: Any, address: str) -> tuple[Any, ConsoleLog]:
    page = context.new_page()
    log = ConsoleLog(page)
    page.goto(address)
    return page, log


# GWP-ASan's sampling as gwp_asan_args forces it: about one allocation in 200 (Chromium: one in 1500
# to 24000), with room for that many (it stops sampling for good once its slots are full).
DENSE_SAMPLING = ("AllocationSamplingMultiplier/200/AllocationSamplingRange/1"
                  "/MaxAllocations/2000/MaxMetadata/4000/TotalPages/8000")


def gwp_asan_args(probability: str, sampling: str = DENSE_SAMPLING) -> list[str]:
    """The harness's flags with GWP-ASan on in ``probability`` of the processes (``"1.0"``: every
    one), at ``sampling`` (``""``: Chromium's own)."""
    features = ",".join(f"{feature}:ProcessSamplingProbability/{probability}" + (f"/{sampling}" if sampling else "")
                        for feature in ("GwpAsanMalloc", "GwpAsanPartitionAlloc"))
    return [arg for arg in CHROMIUM_ARGS if not arg.startswith("--enable-features")] + [
        "--enable-features=Vulkan," + features]


# A small set tuned from JavaScript on the page (a set named by the argument): Python runs under
# each call, as in e2e/test_js_api.py. Resolves to the key's state once settled ("Hit").
SMALL_TUNE = r"""
async (name) => {
  const wgtune = window.wgtune;
  const device = wgtune.device;
  const n = 1000;
  const source = `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < ${n}u) { y[g.x] = 2.0 * x[g.x]; } }`;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  const x = device.createBuffer({ size: 4 * n, usage });
  const y = device.createBuffer({ size: 4 * n, usage });
  const set = await wgtune.defineSet({
    name,
    candidates: [64, 128, 256].map((wg) => ({
      name: `wg${wg}`, wgsl: source, constants: { WG: wg }, grid: () => [Math.ceil(n / wg)],
    })),
    key: () => ({ n }),
  });
  const call = { buffers: { x, y } };
  set.check(call);
  const settled = await set.settle(call);
  await set.execute(call);
  return settled.state;
}
"""


def wait_ready(page: Any) -> None:
    """Wait for the page's wgtune: its ready promise resolves (or rejects, raising here)."""
    page.wait_for_function("window.wgtune && window.wgtune.ready", timeout=READY_TIMEOUT_MS)
    page.evaluate("window.wgtune.ready.then(() => true)")


RUN_WINNER = """async ([set, key]) => {
  for (let i = 0; i < 100; i++) {
    const ran = await window.wgtune.execute(set, key);
    if (!ran.ran_fallback) return ran;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return null;
}"""


def run_winner(page: Any, set_name: str, key: str) -> dict | None:
    """Execute ``set_name``'s ``key`` in the page until the call runs the key's winner, not the
    fallback (the first calls on a winner known but not yet compiled run the fallback while it
    compiles on the event loop): what ``wgtune.execute`` answered then, or None after 5 s."""
    return page.evaluate(RUN_WINNER, [set_name, key])
