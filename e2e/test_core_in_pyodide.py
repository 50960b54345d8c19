"""One core: the core's own unit tests (marked ``core``: the fake device, no wgpu) run inside
Pyodide.

The page installs the wgtune wheel; this test hands it pytest's wheels (pinned in
e2e/pyodide-requirements.txt, downloaded by ``make setup-browser`` into build/pyodide-wheels) through
Playwright routing, since the page fetches nothing from the network and ``wgtune serve`` serves
only its own files. It writes tests/fakes.py and every test file with a test marked ``core``
into Pyodide's file system, runs pytest there on the tests so marked, and asserts that every
test natively collected ran and passed, except exactly the ones listed in EXCLUDED (real
threads, which Pyodide has not; a loop-less caller, which Pyodide cannot be), skipped there by
their own ``skipif`` with the listed reason.

Python runs on the page's own stack, as wgtune runs it, never on a JSPI (stack switching) stack:
Chromium's renderer can crash while Python runs on one (docs/development.md, "The browser tests'
tab crash"; this test crashed so in CI in session 36, while it still ran there). Pyodide's
``asyncio.run`` needs JSPI, as it blocks on the page's WebLoop, so during the run the tests that
drive an event loop with ``asyncio.run`` get a plain asyncio loop of their own (``PlainLoop`` in
:data:`RUN_PYTEST`), as they do natively. The page's WebLoop is what the browser tests exercise.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import ROOT

TESTS = ROOT / "tests"
WHEELS = ROOT / "build" / "pyodide-wheels"
# Modules of tests/ that the core tests import beside wgtune: shipped to the page with them.
HELPERS = ("fakes.py", "wgsl_samples.py")
REQUIREMENTS = Path(__file__).with_name("pyodide-requirements.txt")
ROUTE = "/_pyodide-test-wheels/"
WORKDIR = "/home/pyodide/core_tests"
RUN_SECONDS = 300  # normally a few seconds; generous for 2 cores shared with other browsers

# The only core tests that do not run in Pyodide, with the reason their skipif gives; a test skipped
# there that is not listed here (or listed and not skipped) fails this test.
EXCLUDED = {
    "test_core_concurrency.py::test_two_threads_missing_the_same_key_run_one_tune_and_the_other_runs_the_fallback":
        "Pyodide has no threads",
    "test_core_concurrency.py::test_many_threads_missing_the_same_key_run_exactly_one_tune":
        "Pyodide has no threads",
    "test_core_errors.py::test_spawning_a_tune_without_a_running_event_loop_raises_and_leaves_the_key_a_miss":
        "Pyodide's event loop is always running",
}

# Runs in the page (runPython, on the page's own stack): pytest on the written tests, each test's outcome collected by a
# plugin; returns JSON. A failure's report is kept whole, so this test can show it.
RUN_PYTEST = r"""
import asyncio, json, sys, time
import pytest

class NoFiles:
    "A selector with nothing to watch: the plain loop waits on it only for its next timer."
    def select(self, timeout):
        if timeout:
            time.sleep(timeout)
        return []

class PlainLoop(asyncio.BaseEventLoop):
    "asyncio's own loop, run on this stack: timers and callbacks, no files, no threads."
    def __init__(self):
        super().__init__()
        self._selector = NoFiles()

    def _process_events(self, event_list):
        pass

    def _write_to_self(self):
        pass

web_loop = asyncio.get_running_loop()  # Pyodide's WebLoop, always set as running
pyodide_run = asyncio.run

plain_runs = []

def run_on_a_plain_loop(main, *, debug=None, loop_factory=None):
    if asyncio._get_running_loop() is not web_loop:  # as natively: no asyncio.run inside a running loop
        raise RuntimeError("asyncio.run() cannot be called from a running event loop")
    plain_runs.append(getattr(main, "__qualname__", repr(main)))
    asyncio._set_running_loop(None)
    try:
        with asyncio.Runner(debug=debug, loop_factory=loop_factory or PlainLoop) as runner:
            return runner.run(main)
    finally:
        asyncio._set_running_loop(web_loop)

class Outcomes:
    def __init__(self):
        self.tests = {}       # nodeid -> passed | failed | skipped | error
        self.reasons = {}     # nodeid -> the skip reason
        self.reports = {}     # nodeid -> the failure's report
        self.collect_errors = {}
        self.wgtune_files = {}

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors[report.nodeid] = report.longreprtext

    def pytest_runtest_logreport(self, report):
        nodeid = report.nodeid
        if report.failed:
            self.tests[nodeid] = "failed" if report.when == "call" else "error"
            self.reports.setdefault(nodeid, "")
            self.reports[nodeid] += f"[{report.when}] {report.longreprtext}\n"
        elif report.skipped:
            self.tests[nodeid] = "skipped"
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.reasons[nodeid] = reason.removeprefix("Skipped: ")
        elif report.when == "call":
            self.tests.setdefault(nodeid, "passed")

    def pytest_sessionfinish(self, session):
        # Which wgtune the tests ran against: the files of the wgtune modules and objects that fakes
        # and every test module imported.
        for name, module in list(sys.modules.items()):
            if name != "fakes" and (getattr(module, "__file__", None) or "").rsplit("/", 1)[0] != WORKDIR:
                continue
            used = set()
            for value in vars(module).values():
                source = value.__name__ if isinstance(value, type(sys)) else getattr(value, "__module__", None)
                if isinstance(source, str) and (source == "wgtune" or source.startswith("wgtune.")):
                    used.add(sys.modules[source].__file__)
            self.wgtune_files[name] = sorted(used)

outcomes = Outcomes()
started = time.perf_counter()
asyncio.run = run_on_a_plain_loop
try:
    code = pytest.main([WORKDIR, "-p", "no:cacheprovider", "-q", "-o", "addopts=", "--rootdir", WORKDIR,
                        "-m", "core", "-W", "ignore::pytest.PytestUnknownMarkWarning"], plugins=[outcomes])
finally:
    asyncio.run = pyodide_run
seconds = time.perf_counter() - started

import importlib.metadata
import pyodide.ffi
import wgtune
wheel = importlib.metadata.distribution("wgtune")  # the wheel the page put on sys.path
in_wheel = {str(wheel.locate_file(path)) for path in wheel.files}
used = {path for paths in outcomes.wgtune_files.values() for path in paths}
used |= {module.__file__ for name, module in sys.modules.items() if name.split(".")[0] == "wgtune"}
json.dumps({
    "exit_code": int(code),
    "seconds": seconds,
    "platform": sys.platform,
    "can_run_sync": pyodide.ffi.can_run_sync(),
    "plain_loop_runs": len(plain_runs),
    "tests": outcomes.tests,
    "reasons": outcomes.reasons,
    "reports": outcomes.reports,
    "collect_errors": outcomes.collect_errors,
    "wgtune_file": wgtune.__file__,
    "wgtune_version": wgtune.__version__,
    "wgtune_files": outcomes.wgtune_files,
    "wheel_init": str(wheel.locate_file("wgtune/__init__.py")),
    "dist_version": wheel.version,
    "not_from_wheel": sorted(used - in_wheel),
})
"""

LOAD_PACKAGES = """async (urls) => {
    const api = await window.wgtune.ready;
    const problems = [];
    const loaded = await api.pyodide.loadPackage(urls.map((url) => location.origin + url), {
        messageCallback: () => {}, errorCallback: (message) => problems.push(message),
    });
    return { names: loaded.map((pkg) => pkg.name), problems };
}"""

WRITE_FILES = """async ({ dir, files }) => {
    const api = await window.wgtune.ready;
    api.pyodide.FS.mkdirTree(dir);
    for (const [name, text] of Object.entries(files)) api.pyodide.FS.writeFile(`${dir}/${name}`, text);
}"""

# Runs RUN_PYTEST, on this thread's own stack (runPython: never on a JSPI stack). A run that hangs
# must still end (page.evaluate has no timeout): after `seconds` a worker interrupts Python
# (KeyboardInterrupt: pytest stops and reports), though Python blocks this thread, and again every
# second after (asyncio.Runner turns a first one into a cancel, which a busy coroutine never sees).
RUN = """async ({ code, dir, seconds }) => {
    const api = await window.wgtune.ready;
    const py = api.pyodide;
    if (!crossOriginIsolated) throw new Error("the page is not cross-origin isolated: no SharedArrayBuffer");
    const interrupt = new Uint8Array(new SharedArrayBuffer(1));
    py.setInterruptBuffer(interrupt);
    const source = `onmessage = ({ data }) => {
        setTimeout(() => {
            Atomics.store(data.interrupt, 0, 2);  // 2: SIGINT
            setInterval(() => Atomics.store(data.interrupt, 0, 2), 1000);
        }, data.ms);
        postMessage("armed");
    };`;
    const watchdog = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })));
    // The worker starts only while this thread is free: wait until it is armed.
    await new Promise((armed) => {
        watchdog.onmessage = armed;
        watchdog.postMessage({ interrupt, ms: seconds * 1000 });
    });
    try {
        return py.runPython(code, { globals: py.toPy({ WORKDIR: dir }) });
    } finally {
        watchdog.terminate();
        interrupt[0] = 0;  // not left for the page's next Python call
    }
}"""


def pinned_wheels() -> list[Path]:
    """The wheel file of every pin in pyodide-requirements.txt; fails, saying what to run, if one is missing."""
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", REQUIREMENTS.read_text(), re.MULTILINE)
    assert pins, f"no pins in {REQUIREMENTS}"
    wheels, missing = [], []
    for name, version in pins:
        stem = re.sub(r"[-_.]+", "_", name).lower()
        found = [path for path in WHEELS.glob("*.whl") if path.name.lower().startswith(f"{stem}-{version}-")]
        if found:
            wheels.append(found[0])
        else:
            missing.append(f"{name}=={version}")
    if missing:
        pytest.fail(f"the pytest wheels for Pyodide are missing from {WHEELS} ({', '.join(missing)}): "
                    f"run `make setup-browser`", pytrace=False)
    return wheels


def native_core_test_ids() -> set[str]:
    """Every test marked ``core``, as pytest names it in WORKDIR (``file::test[params]``), collected natively."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
               "-m", "core", "--rootdir", str(TESTS), str(TESTS)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"collecting the core's tests natively failed:\n{done.stdout}{done.stderr}"
    return {line for line in done.stdout.splitlines() if line.startswith("test_") and "::" in line}


def core_test_files(test_ids: set[str]) -> dict[str, str]:
    """The shared helpers (:data:`HELPERS`) and every test file that holds a test marked ``core``."""
    names = sorted({test_id.split("::", 1)[0] for test_id in test_ids})
    assert len(names) >= 6, f"expected the core's test files in {TESTS}, found {names}"
    files = {name: (TESTS / name).read_text() for name in names}
    files.update({name: (TESTS / name).read_text() for name in HELPERS})
    return files


def load_pytest(page, wheels: list[Path]) -> None:
    """Install the pinned wheels in the page's Pyodide, served to it by routing (not by the server)."""
    by_name = {path.name: path for path in wheels}

    def serve_wheel(route) -> None:
        name = route.request.url.rsplit("/", 1)[-1]
        headers = {"Cross-Origin-Resource-Policy": "same-origin"}  # the page is cross-origin isolated
        if name in by_name:
            route.fulfill(status=200, body=by_name[name].read_bytes(), content_type="application/zip", headers=headers)
        else:
            route.fulfill(status=404, body=b"not a pinned wheel", content_type="text/plain", headers=headers)

    page.route(f"**{ROUTE}*", serve_wheel)
    loaded = page.evaluate(LOAD_PACKAGES, [ROUTE + path.name for path in wheels])
    wanted = {canonical(path.name.split("-")[0]) for path in wheels}
    got = {canonical(name) for name in loaded["names"]}
    # A failed load does not throw: loadPackage reports it only through what it returns.
    assert wanted <= got, f"Pyodide did not load {sorted(wanted - got)}: {loaded['problems']}"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# In the page: whether its Python can block on a promise (run as a coroutine: it can only on JSPI stacks), and whether
# WebAssembly's stack switching is still there for the page's own code after wgtune started.
STACK_SWITCHING = """async () => {
    const api = await window.wgtune.ready;
    return {
        canRunSync: await api.pyodide.runPythonAsync("import pyodide.ffi; pyodide.ffi.can_run_sync()"),
        browserHasIt: "Suspending" in WebAssembly && "promising" in WebAssembly,
    };
}"""


def test_the_page_runs_python_off_stack_switching_unless_asked(browser):
    for query, can_run_sync in (("", False), ("?stack-switching", True)):
        page, _ = browser.open(query)
        try:
            found = page.evaluate(STACK_SWITCHING)
        finally:
            page.close()
        assert found == {"canRunSync": can_run_sync, "browserHasIt": True}, (query, found)


def test_the_core_unit_tests_pass_in_pyodide(browser, artifacts, capsys):
    wheels = pinned_wheels()
    expected = native_core_test_ids()
    files = core_test_files(expected)
    page, log = browser.open()
    try:
        started = time.perf_counter()
        load_pytest(page, wheels)
        page.evaluate(WRITE_FILES, {"dir": WORKDIR, "files": files})
        result = json.loads(page.evaluate(RUN, {"code": RUN_PYTEST, "dir": WORKDIR, "seconds": RUN_SECONDS}))
        elapsed = time.perf_counter() - started
    finally:
        (artifacts / "core-in-pyodide.log").write_text("".join(f"[{kind}] {text}\n" for kind, text in log.messages))
        page.close()
    (artifacts / "core-in-pyodide.json").write_text(json.dumps(result, indent=2, sort_keys=True))

    tests = result["tests"]
    by_outcome: dict[str, set[str]] = {}
    for nodeid, outcome in tests.items():
        by_outcome.setdefault(outcome, set()).add(nodeid)
    passed, skipped = by_outcome.get("passed", set()), by_outcome.get("skipped", set())
    failed = by_outcome.get("failed", set()) | by_outcome.get("error", set())
    with capsys.disabled():
        print(f"\ncore tests in Pyodide: {len(passed)} passed, {len(skipped)} excluded, {len(failed)} failed "
              f"of {len(expected)}; {result['plain_loop_runs']} asyncio.run on the plain loop; "
              f"pytest {result['seconds']:.1f}s, {elapsed:.1f}s with installing pytest")

    # It ran in Pyodide, against the wgtune of the wheel the page installed: every wgtune module that
    # fakes.py and the test modules imported is a file of that wheel.
    assert result["platform"] == "emscripten"
    assert result["wgtune_file"] == result["wheel_init"], result["wgtune_file"]
    # From the wheel, which the page puts on sys.path as the zip it is (web/python.js installWheel).
    assert ".whl/wgtune/" in result["wgtune_file"] and not result["wgtune_file"].startswith(WORKDIR)
    assert result["dist_version"] == result["wgtune_version"]
    assert set(result["wgtune_files"]) == {name.removesuffix(".py") for name in files}
    # Every module but the plain WGSL text (wgsl_samples) used wgtune.
    assert all(used for name, used in result["wgtune_files"].items() if name != "wgsl_samples"), result["wgtune_files"]
    assert result["not_from_wheel"] == [], result["not_from_wheel"]

    assert result["collect_errors"] == {}, "\n".join(f"{k}:\n{v}" for k, v in result["collect_errors"].items())
    assert not result["can_run_sync"], "the core's tests ran on a JSPI stack, where Chromium's renderer can crash"
    # Without it their asyncio.run would fail (a loop, the WebLoop, is already running), so they all took it.
    assert result["plain_loop_runs"] > 0, "no test's asyncio.run took the plain loop"
    assert failed == set(), "core tests failing in Pyodide:\n" + "\n".join(
        f"--- {nodeid}\n{result['reports'].get(nodeid, '')}" for nodeid in sorted(failed))
    assert result["exit_code"] == 0, (f"pytest in Pyodide exited with {result['exit_code']} (2: interrupted, "
                                      f"as by the watchdog after {RUN_SECONDS} s); its output is in "
                                      f"{artifacts / 'core-in-pyodide.log'}")
    assert set(tests) == expected, (f"not run in Pyodide: {sorted(expected - set(tests))}; "
                                    f"unknown: {sorted(set(tests) - expected)}")
    assert {nodeid: result["reasons"][nodeid] for nodeid in skipped} == EXCLUDED
    assert passed == expected - set(EXCLUDED)
    assert len(passed) == len(expected) - len(EXCLUDED)
    assert log.errors == []
