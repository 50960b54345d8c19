"""The wake (``wgtune.gpu.wake``) in the page: a fallback adapter (SwiftShader here) has no idle
clock to bring up, and on an adapter that has one the spin kernel's timed passes run through the
browser's WebGPU, each lasting at least PASS_GRAINS of the clock's grain (Chrome quantizes its
timestamps to about 100 us on a GPU)."""

from __future__ import annotations

WAKE_IN_THE_PAGE = """
from js import window
from wgtune.gpu import wake as wake_module
from wgtune.gpu.clock import clock_grain

device = window.wgtune.session.device
fallback = device.idle_clocks
wake_module.SPIN_GRID = (1, 1, 1)  # SwiftShader runs it on the host's cores: one workgroup is enough
device.idle_clocks = True  # as for an adapter that is not a fallback one
try:
    woke = await wake_module.wake(device, 60.0)  # a limit no busy machine reaches
    again = await wake_module.wake(device, 60.0)
finally:
    device.idle_clocks = fallback
    wake_module.SPIN_GRID = (256, 1, 1)
grain = await clock_grain(device)
spinner = wake_module._SPINNERS[device]
[fallback, str(device.timing), woke.failed, len(woke.readings), spinner.repeats * (spinner.fastest or 0.0), grain,
 again.fastest_before or 0.0, woke.cut_short]
"""


def test_the_page_wakes_only_an_adapter_with_an_idle_clock_and_its_passes_outlast_the_clock_grain(browser):
    page, log = browser.open()
    try:
        answer = page.evaluate("(code) => window.wgtune.pyodide.runPythonAsync(code).then((r) => r.toJs())",
                               WAKE_IN_THE_PAGE)
    finally:
        page.close()
    fallback, timing, failed, passes, warm_pass, grain, figure, cut_short = answer
    assert fallback is False  # SwiftShader is a fallback adapter: a tune in the page does not wake it
    assert timing == "gpu-timestamp" and failed == "" and not cut_short
    assert passes >= 2 and figure > 0  # readings steady, and the device's figure kept for the next wake
    from wgtune.gpu.wake import PASS_GRAINS, PASS_SECONDS

    # A pass at the clock the wake brought up lasts PASS_GRAINS of the clock's grain, or PASS_SECONDS
    # (a dispatch on SwiftShader may outlast either: one dispatch a pass then).
    assert warm_pass >= 0.9 * min(max(PASS_SECONDS, PASS_GRAINS * grain), figure), (warm_pass, grain, figure)
    assert log.errors == []
