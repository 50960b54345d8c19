"""The farm on a cluster started as Dask users start one (``dask scheduler``, ``dask worker
--nworkers 2 --name gpu``, a scheduler file): each worker's adapter from its name (on lavapipe
``gpu-1`` has none: named, given nothing), and a scheduler lost mid-run is one clear error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed", reason="the farm extra: pip install -e '.[farm]'")

import dask  # noqa: E402

from wgtune import Config, LogLevel  # noqa: E402
from wgtune.backends.farm import SchedulerLost, WinnerMerger, parse_catalogue, run_farm  # noqa: E402
from wgtune.cli import main  # noqa: E402

QUICK = Config(samples=3, warmups=1, log_level=LogLevel.DISABLED)
DASK = shutil.which("dask", path=str(Path(sys.executable).parent)) or shutil.which("dask")


@pytest.fixture
def cluster(tmp_path):
    """A scheduler on the loopback and two workers named gpu-0, gpu-1, each its own process."""
    if DASK is None:
        pytest.skip("the dask command is not installed")
    file = tmp_path / "scheduler.json"
    env = {**os.environ, "WGTUNE_FARM_ADAPTER": ""}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    scheduler = subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(file)], **quiet)
    workers = subprocess.Popen([DASK, "worker", "--scheduler-file", str(file), "--nworkers", "2", "--nthreads", "1",
                                "--name", "gpu", "--no-dashboard", "--host", "127.0.0.1"], **quiet)
    try:
        deadline = time.monotonic() + 60
        while not file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        with distributed.Client(scheduler_file=str(file), timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield file, scheduler
    finally:
        for process in (workers, scheduler):
            process.terminate()
        for process in (workers, scheduler):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def test_workers_named_gpu_0_and_gpu_1_open_adapters_0_and_1(cluster, tmp_path, capsys, monkeypatch):
    file, _ = cluster
    monkeypatch.setenv("WGTUNE_SAMPLES", "3")
    monkeypatch.setenv("WGTUNE_WARMUPS", "1")
    argv = ["farm", "--scheduler-file", str(file), "--only", "fma", "--cache-dir", str(tmp_path / "c"), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert (summary["jobs"], summary["done"], summary["failed"], summary["retried"]) == (3, 3, 0, 0)
    assert set(summary["workers"]) == {"gpu-0"}  # lavapipe is adapter 0 only
    assert "no WebGPU adapter at index 1; this machine has 1" in summary["unusable"]["gpu-1"]
    assert "worker gpu-1 (tcp://127.0.0.1:" in captured.err and "cannot tune, given no jobs" in captured.err


def test_a_scheduler_lost_mid_run_is_one_clear_error(cluster, tmp_path):
    file, scheduler = cluster
    jobs = parse_catalogue({"matmul": [[32, 32, 32], [64, 64, 64], [128, 128, 128], [64, 32, 128]],
                            "fma": [[4096], [16384]]})

    def lose_the_scheduler(result) -> None:
        scheduler.kill()

    merger = WinnerMerger(tmp_path)
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}), \
            distributed.Client(scheduler_file=str(file), timeout="10s") as client, \
            pytest.raises(SchedulerLost) as lost:
        run_farm(client, jobs, merger, QUICK, on_result=lose_the_scheduler)
    merger.close()
    assert str(lost.value).startswith("lost the Dask scheduler (tcp://127.0.0.1:")
    assert "winner(s) kept in" in str(lost.value) and "NoneType" not in str(lost.value)


def test_a_connection_to_the_scheduler_lost_while_an_answer_comes_is_one_clear_error(cluster, tmp_path, monkeypatch):
    """The other side of the race above, as a loaded machine met it: a job finished, and the
    connection to the scheduler reset while the farm fetched its answer (distributed raises
    CommClosedError from ``Future.result``). Made certain here: after the first answer, every
    fetch fails so, while the jobs stay finished."""
    from distributed.comm.core import CommClosedError

    file, _ = cluster
    jobs = parse_catalogue({"fma": [[4096], [16384], [65536]]})

    def reset(*_args, **_kwargs):
        raise CommClosedError("in <TCP (closed) ConnectionPool.gather>: ConnectionResetError: [Errno 104]")

    def reset_after_the_first_answer(result) -> None:
        distributed.wait(list(client.futures.values()))  # the others finished too: only their answers fail
        monkeypatch.setattr(distributed.Future, "result", reset)

    merger = WinnerMerger(tmp_path)
    with distributed.Client(scheduler_file=str(file), timeout="10s") as client, \
            pytest.raises(SchedulerLost) as lost:
        run_farm(client, jobs, merger, QUICK, on_result=reset_after_the_first_answer)
    merger.close()
    assert str(lost.value).startswith("lost the Dask scheduler (tcp://127.0.0.1:")
    assert "2 job(s) not finished; 1 winner(s) kept in" in str(lost.value)
    assert isinstance(lost.value.__cause__, CommClosedError)
