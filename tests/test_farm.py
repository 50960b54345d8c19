"""The tuning farm on a local Dask cluster of two lavapipe workers: every winner kept once, under
the workers' device; a worker killed mid-run loses no job; a bad catalogue is a clear error;
Ctrl-C keeps what was merged."""

from __future__ import annotations

import itertools
import json
import os
import signal
import time

import pytest

distributed = pytest.importorskip("distributed", reason="the farm extra: pip install -e '.[farm]'")

from wgtune import Config, LogLevel  # noqa: E402 (after the check that Dask is there)
from wgtune.backends.farm import (  # noqa: E402
    WinnerMerger,
    default_catalogue,
    load_catalogue,
    local_cluster,
    parse_catalogue,
    plan_jobs,
    run_farm,
)
from wgtune.backends.farm_worker import ADAPTER_ENV, FarmJob, family_set, worker_adapter  # noqa: E402
from wgtune.backends.native import NativeDevice  # noqa: E402
from wgtune.backends.sqlite_store import CacheDatabase  # noqa: E402
from wgtune.cli import main  # noqa: E402
from wgtune.errors import ConfigError  # noqa: E402
from wgtune.key import Key  # noqa: E402
from wgtune.store.format import canonical_namespace  # noqa: E402

QUICK = Config(samples=3, warmups=1, log_level=LogLevel.DISABLED)  # what is tuned and kept, not how well

# Small keys: each tunes in a fraction of a second on lavapipe.
SMALL = {"fma": [[4096], [8192], [16384], [32768], [65536]], "row_sum": [[64, 256], [128, 512], [16, 1000]]}
# Longer ones (a matmul tune compiles its candidates first): a worker is still busy when one is killed.
LONGER = {"matmul": [[64, 64, 64], [96, 80, 48], [128, 64, 32], [32, 128, 64]], "fma": [[2048], [6000]]}


@pytest.fixture(scope="module")
def client():
    with local_cluster(2, same_adapter=True) as cluster, distributed.Client(cluster) as client:
        yield client


def stored(cache_dir) -> list[tuple[dict, object]]:
    with CacheDatabase(cache_dir) as database:
        entries, problems = database.entries()
    assert problems == []
    return entries


def slots(jobs) -> set:
    return {(family_set(job.set_name).for_key(job.key).name, job.key) for job in jobs}


def test_two_workers_tune_every_job_once_under_the_workers_device(client, tmp_path):
    jobs = parse_catalogue(SMALL)
    merger = WinnerMerger(tmp_path)
    heard = []
    report = run_farm(client, jobs, merger, QUICK, on_result=heard.append)

    assert len(report.workers) == 2 and not report.cancelled and report.failed == []
    assert sorted(r.job.label for r in report.done) == sorted(job.label for job in jobs) == sorted(
        r.job.label for r in heard)
    assert {r.worker for r in report.done} == {"worker-0", "worker-1"}  # both took jobs
    namespaces = {canonical_namespace(identity["namespace"]) for identity in report.workers.values()}
    assert len(namespaces) == 1  # one adapter (lavapipe) under both workers
    entries = stored(tmp_path)
    assert len(entries) == len(jobs)  # every winner once
    assert {canonical_namespace(namespace) for namespace, _ in entries} == namespaces
    assert {entry.slot for _, entry in entries} == slots(jobs)
    for result in report.done:  # what was stored is what the worker's tune decided
        assert result.entry.winner_name == result.entry.results[result.entry.winner]["name"]
    assert sum(row["done"] for row in report.per_worker().values()) == len(jobs)

    again = run_farm(client, jobs, merger, QUICK)  # a farm run again tunes what is not stored: nothing
    assert len(again.skipped) == len(jobs) and again.results == []
    merger.close()


def test_killing_a_worker_mid_run_loses_no_job(client, tmp_path):
    jobs = parse_catalogue(LONGER)
    pids = client.run(os.getpid)
    killed = []

    def kill_a_busy_worker(result) -> None:
        if killed:
            return
        busy = [address for address, tasks in client.processing().items() if tasks and address in pids]
        assert busy, "no worker was running a job when one should have been killed"
        os.kill(pids[busy[0]], signal.SIGKILL)  # the worker's process, not its nanny
        killed.append(busy[0])

    merger = WinnerMerger(tmp_path)
    report = run_farm(client, jobs, merger, QUICK, retune=True, on_result=kill_a_busy_worker)
    merger.close()

    assert killed and not report.cancelled
    assert report.failed == [] and len(report.done) == len(jobs)
    assert report.retried >= 1  # the killed worker's job ran again
    assert {entry.slot for _, entry in stored(tmp_path)} == slots(jobs)
    assert len(stored(tmp_path)) == len(jobs)


def test_cancelling_keeps_what_was_merged(client, tmp_path):
    jobs = plan_jobs(("matmul", shape) for shape in itertools.islice(itertools.product((32, 64, 128), repeat=3), 12))
    assert len(jobs) == 12

    heard = []

    def interrupt(result) -> None:
        if not heard:
            time.sleep(0.3)  # the other worker finishes its job meanwhile: kept too, though not yet merged
        heard.append(result)
        raise KeyboardInterrupt  # what Ctrl-C raises in the client's loop (and again for each one kept)

    merger = WinnerMerger(tmp_path)
    report = run_farm(client, jobs, merger, QUICK, retune=True, on_result=interrupt)
    merger.close()

    assert report.cancelled
    assert 1 <= len(report.done) < len(jobs) and len(heard) == len(report.results)
    assert {entry.slot for _, entry in stored(tmp_path)} == slots(r.job for r in report.done)


def test_a_failing_job_is_reported_once_and_the_others_still_finish(client, tmp_path):
    good = plan_jobs([("fma", (4096,)), ("row_max", (64, 256))])
    wrong_key = FarmJob("fma", (1024,), Key({"n": 1}))  # a tune's own failure (a WgtuneError): not retried
    broken = FarmJob("fma", (1.5,), Key({"n": 1}))  # anything else (a TypeError) raises: retried once, then reported
    unknown = FarmJob("no_such_set", (1,), Key({"n": 1}))  # a set the workers lack: named, not retried
    merger = WinnerMerger(tmp_path)
    report = run_farm(client, [*good, wrong_key, broken, unknown], merger, QUICK, retune=True)
    merger.close()

    assert sorted(r.job.label for r in report.done) == sorted(job.label for job in good)
    failed = {r.job.label: r.error for r in report.failed}
    assert "the call's key is [dtype=f32, n=1024, vec=4], the catalogue planned [n=1]" in failed["fma 1024"]
    assert failed["fma 1.5"].startswith("TypeError")
    assert failed["no_such_set 1"].startswith("ConfigError: unknown set 'no_such_set'; sets: matmul, matmul_f16, fma")
    assert report.retried == 1  # the one that raised ran twice; the tune that failed ran once
    assert {entry.slot for _, entry in stored(tmp_path)} == slots(good)


def test_a_bad_catalogue_entry_is_a_clear_error_and_the_store_is_left_as_it_was(tmp_path, capsys):
    bad = {
        "nope": ({"matmul_huge": [[1, 2, 3]]}, "unknown set 'matmul_huge'"),
        "arity": ({"matmul": [[64, 64]]}, "matmul[0]: expected [M, N, K], got [64, 64]"),
        "zero": ({"fma": [[1024], [0]]}, "fma[1]: N must be a positive integer, got 0"),
        "past u32": ({"fma": [[2**32]]}, "fma[0]: N must be a positive integer below 2**32 (a kernel reads it as a "
                                         "u32), got 4294967296"),
        "flag": ({"row_sum": [[True, 4]]}, "row_sum[0]: rows must be a positive integer, got true"),
        "sizes": ({"fma": 1024}, "fma: expected a list of sizes, got int"),
        "list": ([["fma", 1024]], "expected a JSON object of set name -> list of sizes"),
    }
    for name, (document, message) in bad.items():
        with pytest.raises(ConfigError) as raised:
            parse_catalogue(document, name)
        assert message in str(raised.value) and str(raised.value).startswith(name)

    cache = tmp_path / "cache"
    merger = WinnerMerger(cache)  # a store with a winner in it, which a bad catalogue must not touch
    merger.store({"device": "kept"}).save(a_stored_entry(tmp_path))
    merger.close()
    before = stored(cache)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"fma": [[1024], [-5]]}))
    assert main(["farm", "--catalogue", str(path), "--cache-dir", str(cache)]) == 2
    error = capsys.readouterr().err
    assert f"{path}: fma[1]: N must be a positive integer, got -5" in error
    path.write_text("{not json")
    assert main(["farm", "--catalogue", str(path), "--cache-dir", str(cache)]) == 2
    assert str(path) in capsys.readouterr().err
    assert stored(cache) == before


def a_stored_entry(tmp_path):
    """One real entry, as a tune stores it (a tuner on lavapipe, fma on 4096 floats)."""
    from wgtune.backends.local import open_tuner
    from wgtune.kernels.demo import make_fma_args

    tuner = open_tuner(config=Config(samples=3, warmups=1, log_level=LogLevel.DISABLED, cache=False))
    tunables = family_set("fma")
    call = make_fma_args(tuner.device, (4096,))
    tuner.execute(tunables, call)
    return tuner.cache.entry(tunables, tuner.key(tunables, call))


def test_sizes_that_share_a_key_are_one_job_planned_as_the_worker_keys_it():
    jobs = plan_jobs([("fma", (1 << 18,)), ("fma", ((1 << 18) - 4,)), ("fma", ((1 << 18) - 1,))])
    assert [job.size for job in jobs] == [(1 << 18,), ((1 << 18) - 1,)]  # 2**18 - 4 has 2**18's key
    assert len(default_catalogue()) == 8 and {job.set_name for job in default_catalogue(["fma"])} == {"fma"}
    with pytest.raises(ConfigError, match="unknown set"):
        default_catalogue(["fmaa"])


def test_a_catalogue_file_reads_as_its_document(tmp_path):
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(LONGER))
    assert load_catalogue(path) == parse_catalogue(LONGER)
    assert [job.set_name for job in load_catalogue(path, only=["fma"])] == ["fma", "fma"]


def test_a_worker_opens_the_adapter_its_environment_names(monkeypatch):
    monkeypatch.setenv(ADAPTER_ENV, "0")
    assert worker_adapter() == 0
    monkeypatch.setenv(ADAPTER_ENV, "first")
    with pytest.raises(ConfigError, match=f"{ADAPTER_ENV}='first' is not an adapter index"):
        worker_adapter()
    device = NativeDevice.open(adapter_index=0)
    assert device.identity.device  # the adapter at index 0, opened
    with pytest.raises(ConfigError, match="no WebGPU adapter at index 99; this machine has"):
        NativeDevice.open(adapter_index=99)


def test_the_command_farms_the_demo_sets_and_a_second_run_tunes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WGTUNE_SAMPLES", "3")
    monkeypatch.setenv("WGTUNE_WARMUPS", "1")
    cache = str(tmp_path / "cache")
    assert main(["farm", "--workers", "2", "--same-adapter", "--only", "fma", "--cache-dir", cache, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["jobs"], first["done"], first["failed"], first["skipped"]) == (3, 3, 0, 0)
    assert all(result["winner"] for result in first["results"])
    assert main(["farm", "--workers", "1", "--only", "fma", "--cache-dir", cache, "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert (second["done"], second["skipped"]) == (0, 3)
    assert main(["farm", "--scheduler", "tcp://127.0.0.1:1", "--workers", "2"]) == 2
    assert "--scheduler joins a cluster" in capsys.readouterr().err


def test_adapter_indices_count_gpus_not_their_opengl_twins(monkeypatch):
    from types import SimpleNamespace

    import wgpu

    from wgtune.backends import native_adapters

    def adapter(name, backend):
        return SimpleNamespace(info={"device": name, "backend_type": backend})

    # What an H200 node lists: each GPU through Vulkan, then again through OpenGL.
    listed = [adapter("gpu0", "Vulkan"), adapter("gpu0/PCIe", "OpenGL"), adapter("gpu1", "Vulkan")]
    monkeypatch.setattr(wgpu.gpu, "enumerate_adapters_sync", lambda: listed)
    assert [a.info["device"] for a in native_adapters.indexed_adapters()] == ["gpu0", "gpu1"]
    with pytest.raises(ConfigError, match="index 2; this machine has 2"):
        native_adapters.adapter_at(2)
    listed[:] = [adapter("only-gl", "OpenGL")]  # no other backend: OpenGL it is
    assert [a.info["device"] for a in native_adapters.indexed_adapters()] == ["only-gl"]
