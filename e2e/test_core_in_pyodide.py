"""One core: the core's own unit tests (tests/test_core_*.py on the fake device) run inside Pyodide.

The page installs the wgtune wheel; this test hands it pytest's wheels (pinned in
e2e/pyodide-requirements.txt, downloaded by ``make setup-browser`` into build/pyodide-wheels)
through Playwright routing, since the page fetches nothing from the network and ``wgtune serve``
serves only its own files. It writes tests/fakes.py and every tests/test_core_*.py into Pyodide's
file system, runs pytest there, and asserts every test passed except exactly the ones that cannot
run in a browser (they use real threads: Pyodide has none), which are skipped by name and reason.
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
REQUIREMENTS = Path(__file__).with_name("pyodide-requirements.txt")
ROUTE = "/_pyodide-test-wheels/"
WORKDIR = "/home/pyodide/core_tests"
RUN_TIMEOUT_MS = 600_000  # 2 cores shared with other browsers: generous

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

# Runs in the page (runPythonAsync): pytest on the written tests, each test's outcome collected by a
# plugin; returns JSON. A failure's report is kept whole, so this test can show it.
RUN_PYTEST = r"""
import json, sys, time
import pytest

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
            if name != "fakes" and not name.startswith("test_core_"):
                continue
            used = set()
            for value in vars(module).values():
                source = value.__name__ if isinstance(value, type(sys)) else getattr(value, "__module__", None)
                if isinstance(source, str) and (source == "wgtune" or source.startswith("wgtune.")):
                    used.add(sys.modules[source].__file__)
            self.wgtune_files[name] = sorted(used)

outcomes = Outcomes()
started = time.perf_counter()
code = pytest.main([WORKDIR, "-p", "no:cacheprovider", "-q", "-o", "addopts=", "--rootdir", WORKDIR],
                   plugins=[outcomes])
seconds = time.perf_counter() - started

import importlib.metadata
import wgtune
distribution = importlib.metadata.distribution("wgtune")
json.dumps({
    "exit_code": int(code),
    "seconds": seconds,
    "platform": sys.platform,
    "pytest": pytest.__version__,
    "tests": outcomes.tests,
    "reasons": outcomes.reasons,
    "reports": outcomes.reports,
    "collect_errors": outcomes.collect_errors,
    "wgtune_file": wgtune.__file__,
    "wgtune_files": outcomes.wgtune_files,
    "wgtune_modules": {name: getattr(module, "__file__", None) for name, module in sys.modules.items()
                       if name == "wgtune" or name.startswith("wgtune.")},
    "wgtune_version": wgtune.__version__,
    "dist_version": distribution.version,
    "dist_init": str(distribution.locate_file("wgtune/__init__.py")),
    "installer": (distribution.read_text("INSTALLER") or "").strip(),
})
"""


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


def core_test_files() -> dict[str, str]:
    files = {path.name: path.read_text() for path in sorted(TESTS.glob("test_core_*.py"))}
    assert len(files) >= 6, f"expected the core's test files in {TESTS}"
    files["fakes.py"] = (TESTS / "fakes.py").read_text()
    return files


def native_core_test_ids() -> set[str]:
    """Every core test's id as pytest names it in WORKDIR (``file::test[params]``), collected natively."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
               "--rootdir", str(TESTS), *(str(path) for path in sorted(TESTS.glob("test_core_*.py")))]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"collecting the core's tests natively failed:\n{done.stdout}{done.stderr}"
    return {line for line in done.stdout.splitlines() if line.startswith("test_core_") and "::" in line}


def test_the_core_unit_tests_pass_in_pyodide(browser, artifacts, capsys):
    wheels = pinned_wheels()
    files = core_test_files()
    expected = native_core_test_ids()
    by_name = {path.name: path for path in wheels}

    page, log = browser.open()

    def serve_wheel(route):
        name = route.request.url.rsplit("/", 1)[-1]
        if name in by_name:
            route.fulfill(status=200, body=by_name[name].read_bytes(), content_type="application/zip",
                          headers={"Cross-Origin-Resource-Policy": "same-origin"})
        else:
            route.fulfill(status=404, body=b"not a pinned wheel", content_type="text/plain",
                          headers={"Cross-Origin-Resource-Policy": "same-origin"})

    page.route(f"**{ROUTE}*", serve_wheel)
    started = time.perf_counter()
    loaded = page.evaluate(
        """async (urls) => {
            const api = await window.wgtune.ready;
            const problems = [];
            const loaded = await api.pyodide.loadPackage(urls.map((url) => location.origin + url), {
                messageCallback: () => {}, errorCallback: (message) => problems.push(message),
            });
            return { names: loaded.map((pkg) => pkg.name), problems };
        }""",
        [ROUTE + path.name for path in wheels],
    )
    wanted = {re.sub(r"[-_.]+", "-", path.name.split("-")[0]).lower() for path in wheels}
    got = {re.sub(r"[-_.]+", "-", name).lower() for name in loaded["names"]}
    # A failed load does not throw: loadPackage reports it through what it returns.
    assert wanted <= got, f"Pyodide did not load {sorted(wanted - got)}: {loaded['problems']}"

    page.evaluate(
        """async ({ dir, files }) => {
            const api = await window.wgtune.ready;
            api.pyodide.FS.mkdirTree(dir);
            for (const [name, text] of Object.entries(files)) api.pyodide.FS.writeFile(`${dir}/${name}`, text);
        }""",
        {"dir": WORKDIR, "files": files},
    )
    page.set_default_timeout(RUN_TIMEOUT_MS)
    result = json.loads(page.evaluate(
        """async ({ code, dir }) => {
            const api = await window.wgtune.ready;
            const globals = api.pyodide.toPy({ WORKDIR: dir });
            try {
                return await api.pyodide.runPythonAsync(code, { globals });
            } finally {
                globals.destroy();
            }
        }""",
        {"code": RUN_PYTEST, "dir": WORKDIR},
    ))
    elapsed = time.perf_counter() - started
    (artifacts / "core-in-pyodide.json").write_text(json.dumps(result, indent=2, sort_keys=True))

    tests = result["tests"]
    by_outcome: dict[str, set[str]] = {}
    for nodeid, outcome in tests.items():
        by_outcome.setdefault(outcome, set()).add(nodeid)
    passed, skipped = by_outcome.get("passed", set()), by_outcome.get("skipped", set())
    with capsys.disabled():
        print(f"\ncore tests in Pyodide: {len(passed)} passed, {len(skipped)} excluded, "
              f"{len(by_outcome.get('failed', ())) + len(by_outcome.get('error', ()))} failed; "
              f"pytest {result['seconds']:.1f}s, {elapsed:.1f}s with loading pytest")

    # It ran in Pyodide, against the wheel the page installed.
    assert result["platform"] == "emscripten"
    site_packages = str(Path(result["dist_init"]).parent.parent)
    assert result["wgtune_file"] == result["dist_init"] and "site-packages" in site_packages, result["wgtune_file"]
    assert not result["wgtune_file"].startswith(WORKDIR)
    assert result["dist_version"] == result["wgtune_version"]
    package = str(Path(result["dist_init"]).parent) + "/"
    assert set(result["wgtune_files"]) == {"fakes"} | {name.removesuffix(".py") for name in files if name != "fakes.py"}
    for module, used in result["wgtune_files"].items():
        assert used and all(path.startswith(package) for path in used), (module, used)
    assert all(path.startswith(package) for path in result["wgtune_modules"].values()), result["wgtune_modules"]

    failures = {nodeid: result["reports"].get(nodeid, "") for nodeid in
                by_outcome.get("failed", set()) | by_outcome.get("error", set())}
    assert result["collect_errors"] == {}, "\n".join(f"{k}:\n{v}" for k, v in result["collect_errors"].items())
    assert failures == {}, "core tests failing in Pyodide:\n" + "\n".join(
        f"--- {nodeid}\n{report}" for nodeid, report in sorted(failures.items()))
    assert set(tests) == expected, (f"not run in Pyodide: {sorted(expected - set(tests))}; "
                                    f"unknown: {sorted(set(tests) - expected)}")
    assert {nodeid: result["reasons"][nodeid] for nodeid in skipped} == EXCLUDED
    assert passed == expected - set(EXCLUDED)
    assert result["exit_code"] == 0
    assert log.errors == []
