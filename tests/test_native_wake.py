"""The wake's spin kernel on the adapter present (``wgtune.gpu.wake``; its logic: test_core_wake.py)."""

from __future__ import annotations

from wgtune import run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu import wake as wake_module
from wgtune.gpu.device import Timing
from wgtune.gpu.wake import wake


def test_the_spin_kernel_runs_on_the_adapter_present(monkeypatch):
    # lavapipe is a CPU adapter (no idle clock, so a tune does not wake it): forced on here, with
    # one workgroup, so that the WGSL, its binding and the timed passes are real.
    device = NativeDevice.open()
    assert device.timing == Timing.GPU_TIMESTAMP
    assert not device.idle_clocks  # a CPU adapter's clock is the host's
    monkeypatch.setattr(wake_module, "SPIN_GRID", (1, 1, 1))
    device.idle_clocks = True
    woke = run_inline(wake(device, 30.0))  # a limit no busy machine reaches: readings steady well before
    assert not woke.failed and woke.readings and all(seconds > 0 for _, seconds in woke.readings)
    assert run_inline(wake(device, 30.0)).fastest_before is not None  # the device's figure is kept
