"""A runaway candidate on a real adapter (lavapipe here), tuned in process: a Timeout result after
one launch, and a correct winner. (In a tuning process, the default, a runaway is killed:
``test_isolation.py``.)

The runaway (``wgsl_samples.SPIN``) doubles its input like the others, after a spin whose length
comes from its grid: about 6 s a launch on two cores.
"""

from __future__ import annotations

import numpy as np
import pytest
from wgsl_samples import DOUBLE, SPIN

from wgtune import Args, Config, Kernel, Measured, Timeout, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

N = 4096


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def double_set(spin_workgroups: int) -> TunableSet:
    def blocks(args: Args) -> tuple[int, int, int]:
        return (-(-N // 64), 1, 1)

    runaway = Kernel("runaway", SPIN, grid=lambda args: runaway_grid(spin_workgroups))
    return TunableSet(
        f"double_spin_{spin_workgroups}",
        [runaway, Kernel("double", DOUBLE, grid=blocks), Kernel("double_again", DOUBLE + "\n// again\n", grid=blocks)],
        key=lambda args: {"n": N},
    )


def call(device) -> tuple[Args, np.ndarray]:
    x = np.arange(N, dtype=np.float32)
    y = device.create_buffer(size=4 * N)
    return Args({"x": device.create_buffer(x.tobytes()), "y": y}), x


def runaway_grid(spin_workgroups: int) -> tuple[int, int, int]:
    return (64, max(1, spin_workgroups // 64), 1)


def launches_of(device, monkeypatch, grid: tuple[int, int, int]) -> list[str]:
    """Every dispatch and timed pass of ``grid`` on ``device`` from now on (only the runaway has it):
    how often it ran there, counted, rather than guessed from a wall clock a busy machine stretches."""
    seen: list[str] = []
    dispatch, profile = device.dispatch, device.profile

    def counted_dispatch(pipeline, args, launched, repeats=1):
        if tuple(launched) == grid:
            seen.append(f"dispatch x{repeats}")
        return dispatch(pipeline, args, launched, repeats)

    async def counted_profile(pipeline, args, launched, repeats):
        if tuple(launched) == grid:
            seen.append(f"profile x{repeats}")
        return await profile(pipeline, args, launched, repeats)

    monkeypatch.setattr(device, "dispatch", counted_dispatch)
    monkeypatch.setattr(device, "profile", counted_profile)
    return seen


def check_doubled(device, args: Args, x: np.ndarray) -> None:
    out = np.frombuffer(device.read_buffer_sync(args.buffer("y")), dtype=np.float32)
    np.testing.assert_array_equal(out, 2 * x)


def test_a_runaway_is_a_timeout_after_one_launch_and_a_correct_candidate_wins(device, monkeypatch):
    tunables = double_set(8192)  # ~6 s a launch on lavapipe: far past the limit, which the others stay well under
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", samples=3, warmups=2, time_limit=2.0))
    args, x = call(device)
    launches = launches_of(device, monkeypatch, runaway_grid(8192))
    winner = tuner.execute(tunables, args)
    assert winner.name in ("double", "double_again")
    check_doubled(device, args, x)
    runaway, *others = tuner.results(tunables, tunables.key(args))
    assert isinstance(runaway, Timeout), runaway
    assert "first launch took" in runaway.reason
    assert all(isinstance(result, Measured) for result in others)
    # One launch of it, not the warmups, calibration and samples that would each cost as long.
    assert launches == ["dispatch x1"], launches
