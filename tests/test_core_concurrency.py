"""How tunes are driven: inline, as event-loop tasks (the browser's path), and from several threads."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet, settle

from wgtune import (
    MISS,
    PENDING,
    Hit,
    Key,
    MemoryStore,
    NoValidKernelFound,
    StoredEntry,
    TuneFailedEvent,
    run_inline,
    spawn_task,
)

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

EVERY_ASYNC_METHOD = {"compile", "profile", "resolve", "sync", "read_buffer"}


def run_loop(main):
    """asyncio.run, failing the test if the loop saw an exception nobody retrieved."""
    unhandled = []

    async def wrapper():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unhandled.append(context))
        return await main()

    result = asyncio.run(wrapper())
    assert unhandled == []
    return result


# -- execute ---------------------------------------------------------------------------------


def test_execute_on_a_hit_dispatches_the_winner_once_on_the_callers_args():
    device = FakeDevice()
    device.script("a", duration=2e-3)
    device.script("b", duration=1e-3)
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    before = device.dispatches.copy()
    assert tuner.execute(tunables, call(device, [5.0])).name == "b"
    assert device.dispatches - before == {"b": 1}


def test_execute_on_a_stored_hit_compiles_only_the_winner():
    device = FakeDevice()
    tunables = make_set("a", "b", "c")
    store = MemoryStore()
    store.save(StoredEntry("fake", Key({"n": 4}), tunables.checksum, 2, "c"))
    assert make_tuner(device, store=store).execute(tunables, call(device, [1.0])).name == "c"
    assert device.compiles == {"c": 1}
    assert device.dispatches == {"c": 1}


# -- the event loop (browser) path -----------------------------------------------------------


def test_while_a_spawned_tune_is_pending_execute_runs_the_first_candidate_that_compiles():
    device = FakeDevice(suspend=True)
    device.script("broken", compile_error="unsupported extension")
    device.script("safe", duration=3e-3)
    device.script("fast", duration=1e-3)
    tunables = make_set("broken", "safe", "fast")

    async def main():
        tuner = make_tuner(device, spawn=spawn_task)
        args = call(device, [1.0])
        key = tuner.key(tunables, args)
        assert tuner.execute(tunables, args).name == "safe"
        assert tuner.fastest(tunables, key) is PENDING
        assert tuner.check_tune(tunables, key, args) is PENDING
        assert tuner.execute(tunables, args).name == "safe"
        assert await settle(tuner, tunables, key) == Hit(2)
        assert tuner.execute(tunables, args).name == "fast"
        return tuner

    tuner = run_loop(main)
    assert len(tuner.records.records) == 1
    assert tuner.failures == {}
    assert device.dispatches["fast"] >= 1


def test_a_spawned_tune_that_fails_puts_the_key_back_to_miss_and_keeps_the_reason():
    device = FakeDevice(suspend=True)
    device.script("a", launch_error="lost")
    device.script("b", duration=float("nan"))
    tunables = make_set("a", "b")
    events = []

    async def main():
        tuner = make_tuner(device, spawn=spawn_task, observer=events.append)
        args = call(device, [1.0])
        key = tuner.key(tunables, args)
        assert tuner.check_tune(tunables, key, args) is PENDING
        assert await settle(tuner, tunables, key) is MISS
        return tuner, key

    tuner, key = run_loop(main)
    assert isinstance(tuner.failures[("fake", key)], NoValidKernelFound)
    assert isinstance(events[-1], TuneFailedEvent) and "no valid kernel found" in events[-1].reason
    assert tuner._tasks == set()


def test_a_cancelled_tune_task_puts_the_key_back_to_miss():
    device = FakeDevice(suspend=True)
    tunables = make_set("a", "b")

    async def main():
        tuner = make_tuner(device, spawn=spawn_task)
        args = call(device, [1.0])
        key = tuner.key(tunables, args)
        tuner.check_tune(tunables, key, args)
        for _ in range(3):
            await asyncio.sleep(0)
        [task] = tuner._tasks
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert tuner.fastest(tunables, key) is MISS
        assert isinstance(tuner.failures[("fake", key)], asyncio.CancelledError)

    run_loop(main)


def test_tune_async_works_with_a_device_whose_every_method_suspends():
    device = FakeDevice(suspend=EVERY_ASYNC_METHOD)
    device.script("a", duration=2e-3)
    device.script("b", duration=1e-3)
    tunables = make_set("a", "b", outputs=(0,))

    async def main():
        tuner = make_tuner(device, config=quiet(checks=True))
        args = call(device, [1.0])
        assert await tuner.tune_async(tunables, args) == Hit(1)
        assert await tuner.tune_async(tunables, args) == Hit(1)
        return tuner

    tuner = run_loop(main)
    assert len(tuner.records.records) == 1
    assert device.reads > 0


def test_the_inline_runner_raises_a_clear_error_if_the_device_suspends_and_the_key_is_not_stuck():
    device = FakeDevice(suspend=True)
    tunables = make_set("a", "b")
    tuner = make_tuner(device, spawn=run_inline)
    args = call(device, [1.0])
    with pytest.raises(RuntimeError, match=r"suspended.*tune_async\(\).*spawn_task"):
        tuner.execute(tunables, args)
    assert tuner.fastest(tunables, tuner.key(tunables, args)) is MISS


def test_a_tune_stopped_by_the_inline_runner_keeps_a_readable_reason():
    device = FakeDevice(suspend=True)
    tunables = make_set("a", "b")
    tuner = make_tuner(device, spawn=run_inline)
    args = call(device, [1.0])
    with pytest.raises(RuntimeError):
        tuner.execute(tunables, args)
    failure = tuner.failures[("fake", tuner.key(tunables, args))]
    assert isinstance(failure, RuntimeError) and str(failure)


def test_the_inline_runner_works_inside_a_running_event_loop():
    device = FakeDevice()
    tunables = make_set("a", "b")

    async def main():
        tuner = make_tuner(device, spawn=run_inline)
        return tuner.execute(tunables, call(device, [1.0])).name

    assert run_loop(main) == "a"


def test_run_inline_returns_the_value_or_raises_the_exception_of_a_coroutine():
    async def value():
        return 42

    async def fails():
        raise KeyError("x")

    assert run_inline(value()) == 42
    with pytest.raises(KeyError):
        run_inline(fails())


def test_execute_on_a_stored_hit_in_the_event_loop_does_not_crash_when_compiling_suspends():
    device = FakeDevice(suspend={"compile", "resolve"})
    tunables = make_set("a", "b", "c")
    store = MemoryStore()
    store.save(StoredEntry("fake", Key({"n": 4}), tunables.checksum, 2, "c"))

    async def main():
        tuner = make_tuner(device, store=store, spawn=spawn_task)
        await tuner.prepare(tunables)  # what the page does before any call
        args = call(device, [1.0])
        assert tuner.execute(tunables, args).name in ("a", "c")
        await asyncio.sleep(0)
        return tuner.execute(tunables, args).name

    assert run_loop(main) in ("a", "c")


# -- threads ---------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "emscripten", reason="Pyodide has no threads")
def test_two_threads_missing_the_same_key_run_one_tune_and_the_other_runs_the_fallback():
    device = FakeDevice()
    device.script("a", duration=2e-3)
    device.script("b", duration=1e-3)
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    tuning, release = threading.Event(), threading.Event()

    def on_profile(name, repeats):
        tuning.set()
        release.wait(timeout=10)

    device.on_profile = on_profile
    outcome = {}

    def first():
        try:
            outcome["kernel"] = tuner.execute(tunables, call(device, [1.0]))
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert tuning.wait(timeout=10)
        args = call(device, [1.0])
        assert tuner.check_tune(tunables, tuner.key(tunables, args), args) is PENDING
        assert tuner.execute(tunables, args).name == "a"
    finally:
        release.set()
        thread.join(timeout=10)
    assert "error" not in outcome
    assert outcome["kernel"].name == "b"
    assert len(tuner.records.records) == 1
    assert tuner.fastest(tunables, Key({"n": 4})) == Hit(1)


@pytest.mark.skipif(sys.platform == "emscripten", reason="Pyodide has no threads")
def test_many_threads_missing_the_same_key_run_exactly_one_tune():
    device = FakeDevice()
    device.script("a", duration=2e-3)
    device.script("b", duration=1e-3)
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    release = threading.Event()
    device.on_profile = lambda name, repeats: release.wait(timeout=10)
    threads, start = 8, threading.Barrier(8)
    done: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker():
        try:
            start.wait(timeout=10)
            name = tuner.execute(tunables, call(device, [1.0])).name
            with lock:
                done.append(name)
        except BaseException as error:
            errors.append(error)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in workers:
        thread.start()
    try:
        for _ in range(1000):  # every thread but the tuning one comes back with the fallback
            if len(done) >= threads - 1 or errors:
                break
            threading.Event().wait(0.005)
    finally:
        release.set()
        for thread in workers:
            thread.join(timeout=10)
    assert errors == []
    assert sorted(done) == ["a"] * (threads - 1) + ["b"]
    assert len(tuner.records.records) == 1


def test_the_fallback_skips_a_candidate_whose_compile_raises_a_plain_exception():
    device = FakeDevice(suspend=True)
    device.script("odd", compile_exception=RuntimeError("shader cache corrupt"))
    tunables = make_set("odd", "safe", "other")

    async def main():
        tuner = make_tuner(device, spawn=spawn_task)
        args = call(device, [1.0])
        name = tuner.execute(tunables, args).name
        await settle(tuner, tunables, tuner.key(tunables, args))
        return name

    assert run_loop(main) == "safe"
