"""A farm over mixed devices on one machine: lavapipe as two device types (llvmpipe 256 bits, and
128 bits with ``LP_NATIVE_VECTOR_WIDTH=128``) and a worker with no GPU at all (no Vulkan ICD, no
EGL vendor), each worker of 2 threads. Every device type gets every key in one run, a second run
tunes nothing, the GPU-less worker is named and given nothing, a 2-thread worker tunes one job at
a time; and a user's own set, from a module:function, is farmed."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed", reason="the farm extra: pip install -e '.[farm]'")

from wgtune import Config, LogLevel  # noqa: E402 (after the check that Dask is there)
from wgtune.backends.farm import WinnerMerger, local_cluster, parse_catalogue, run_farm  # noqa: E402
from wgtune.backends.sqlite_store import CacheDatabase  # noqa: E402
from wgtune.backends.user_sets import load_sets  # noqa: E402
from wgtune.cli import main  # noqa: E402
from wgtune.errors import ConfigError  # noqa: E402
from wgtune.kernels.families import family_names  # noqa: E402

QUICK = Config(samples=3, warmups=1, log_level=LogLevel.DISABLED)
SMALL = {"fma": [[4096], [16384]], "row_sum": [[64, 256]]}
NARROW = {"LP_NATIVE_VECTOR_WIDTH": "128"}  # llvmpipe then names itself "... 128 bits": another device
NO_GPU = {"VK_ICD_FILENAMES": "/nonexistent", "__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent"}


@pytest.fixture(autouse=True)
def registry_as_it_was():
    """What a test registers (``--sets`` run in this process) is gone after it: the registry is
    global, and a family left in it would join every later test's demo suite and catalogue."""
    from wgtune.backends import user_sets
    from wgtune.kernels.families import FAMILIES

    families, loaded = list(FAMILIES), dict(user_sets._loaded)
    yield
    FAMILIES[:] = families
    user_sets._loaded.clear()
    user_sets._loaded.update(loaded)


@pytest.fixture(scope="module")
def mixed():
    with local_cluster(3, same_adapter=True, nthreads=2, worker_env=[{}, NARROW, NO_GPU]) as cluster, \
            distributed.Client(cluster) as client:
        yield client


def stored(cache_dir) -> dict[str, set]:
    with CacheDatabase(cache_dir) as database:
        entries, problems = database.entries()
    assert problems == []
    slots: dict[str, set] = {}
    for namespace, entry in entries:
        slots.setdefault(namespace["device"]["device"], set()).add(entry.slot)
    return slots


def test_every_device_type_gets_every_key_and_a_second_run_tunes_nothing(mixed, tmp_path):
    jobs = parse_catalogue(SMALL)
    merger = WinnerMerger(tmp_path)
    report = run_farm(mixed, jobs, merger, QUICK)

    devices = {state["device"] for state in report.workers.values()}
    assert devices == {"llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)", "llvmpipe (LLVM 15.0.6, 128 bits) (Vulkan)"} or (
        len(devices) == 2 and all("bits" in device for device in devices))
    assert report.failed == [] and report.jobs == 2 * len(jobs) and len(report.done) == 2 * len(jobs)
    for device in devices:  # each key tuned once on each device type, by a worker of that type
        done = [r for r in report.done if r.device == device]
        assert sorted(r.job.label for r in done) == sorted(job.label for job in jobs)
    by_device = stored(tmp_path)
    assert len(by_device) == 2 and all(len(slots) == len(jobs) for slots in by_device.values())

    (unusable,) = report.unusable.values()  # the GPU-less worker: named, why, and given nothing
    assert unusable["name"] == "worker-2" and "no WebGPU adapter at index 0; this machine has 0" in unusable["error"]
    assert all(r.worker != "worker-2" for r in report.results)

    # Two threads a worker, one tune at a time on each: no two of a worker's jobs overlap.
    for worker in {r.worker for r in report.done}:
        spans = sorted((r.began, r.ended) for r in report.done if r.worker == worker)
        assert all(end <= next_begin for (_, end), (next_begin, _) in itertools.pairwise(spans))

    again = run_farm(mixed, jobs, merger, QUICK)
    assert again.results == [] and len(again.skipped) == 2 * len(jobs) and again.retried == 0
    merger.close()


def docs_module() -> str:
    """The module of docs/fleets.md's "Your own sets on a farm" (run verbatim here)."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "fleets.md").read_text()
    (module,) = [text for text in re.findall(r"```text\n(.*?)```", page, re.S) if "def families():" in text]
    return module


USER_SETS = docs_module()


def test_a_users_own_set_is_farmed_from_a_module(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_kernels.py").write_text(USER_SETS)
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers (spawned) start with this path too
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("WGTUNE_SAMPLES", "3")
    monkeypatch.setenv("WGTUNE_WARMUPS", "1")
    (family,) = load_sets("my_kernels:families")
    assert family.name == "scale_overrides"
    cache = str(tmp_path / "cache")
    argv = ["farm", "--workers", "1", "--sets", "my_kernels:families", "--cache-dir", cache, "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["jobs"], first["done"], first["failed"]) == (2, 2, 0), first
    assert {result["set"] for result in first["results"]} == {"scale_overrides"}
    assert "scale_overrides" in family_names()
    assert main(argv) == 0  # stored already: nothing tuned
    assert json.loads(capsys.readouterr().out)["skipped"] == 2


def test_a_sets_spec_that_is_wrong_says_what(tmp_path, monkeypatch):
    (tmp_path / "not_sets.py").write_text("def families():\n    return [1]\n"
                                          "def raises():\n    raise OSError('no db')\n")
    (tmp_path / "broken_sets.py").write_text("raise RuntimeError('half written')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec, message in [("nocolon", "expected module:function"), ("no_such_module_x:families", "cannot import"),
                          ("not_sets:missing", "has no function 'missing'"), ("not_sets:families", "got int"),
                          ("not_sets:raises", r"not_sets:raises: raises\(\) raised OSError: no db"),
                          ("broken_sets:f", "importing 'broken_sets' raised RuntimeError: half written")]:
        with pytest.raises(ConfigError, match=message):
            load_sets(spec)


def test_the_collector_accepts_a_users_own_sets(tmp_path, monkeypatch):
    import wgtune.cli.collect as collect

    (tmp_path / "my_kernels_c.py").write_text(USER_SETS)
    monkeypatch.syspath_prepend(str(tmp_path))
    made = []
    real = collect.Collector
    monkeypatch.setattr(collect, "Collector", lambda *args, **kwargs: made.append(real(*args, **kwargs)) or made[-1])
    monkeypatch.setattr(collect, "serve_until_interrupted", lambda server: server.server_close())
    argv = ["collect", "--db", str(tmp_path / "fleet.sqlite3"), "--port", "0", "--sets", "my_kernels_c:families"]
    assert main(argv) == 0
    assert {"scale_overrides", "matmul", "fma"} <= set(made[0].known)


LOSING_SETS = '''
import os

from wgtune.errors import DeviceLost
from wgtune.kernels.bandwidth import FMA_FAMILY
import dataclasses


def make_args(device, size):
    if os.environ.get("LOSE_THE_DEVICE"):
        raise DeviceLost("a driver reset, as a test has it")
    return FMA_FAMILY.make_args(device, size)


def families():
    return [dataclasses.replace(FMA_FAMILY, name="fma_lost", make_args=make_args, demo_sizes=())]
'''


def test_a_device_lost_mid_run_retires_its_worker_and_its_jobs_run_on_the_others(tmp_path, monkeypatch):
    from wgtune.backends.user_sets import register_sets

    (tmp_path / "losing_sets.py").write_text(LOSING_SETS)
    monkeypatch.syspath_prepend(str(tmp_path))
    register_sets("losing_sets:families")
    jobs = parse_catalogue({"fma_lost": [[4096], [16384], [65536]]})
    merger = WinnerMerger(tmp_path / "cache")
    with local_cluster(2, same_adapter=True, worker_env=[{"LOSE_THE_DEVICE": "1"}, {}]) as cluster, \
            distributed.Client(cluster) as client:
        report = run_farm(client, jobs, merger, QUICK, sets="losing_sets:families")
        left = {info["name"] for info in client.scheduler_info(n_workers=-1)["workers"].values()}
    merger.close()
    assert report.failed == [] and len(report.done) == len(jobs)
    assert {r.worker for r in report.done} == {"worker-1"}
    assert report.retried >= 1 and "worker-0" not in left  # it ran one job, lost its device, was retired
