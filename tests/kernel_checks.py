"""A checked tune on a real device, shared by the kernel families' tests."""

from __future__ import annotations

import wgtune
from wgtune import Hit, Measured, Skip, TrialFinished


def tune_checked(device, tunables, args, *, samples: int = 3):
    """Tune ``tunables`` on ``args`` with output checks on; assert the key became a Hit and that no
    benchmarked candidate failed or disagreed with candidate 0. Returns the winner and the trials:
    each candidate's last TrialFinished (the adaptive policy reports a finalist twice)."""
    trials: list[TrialFinished] = []
    tuner = wgtune.Tuner(
        device,
        config=wgtune.Config(samples=samples, warmups=1, checks=True, cache=False, log_level="disabled"),
        observer=lambda event: trials.append(event) if isinstance(event, TrialFinished) else None,
    )
    kernel = tuner.execute(tunables, args)
    assert tuner.states(tunables)[tunables.key(args)] == Hit(tunables.index_of[kernel.name])
    last = {event.index: event for event in trials}
    # A Skip is the adaptive policy pruning a hopeless group; each candidate's output is checked
    # on its own elsewhere (the *_matches_numpy tests). A candidate needing a feature the device
    # lacks is refused uncompiled, as it should be.
    lacking = {kernel.name for kernel in tunables.candidates if not set(kernel.features) <= set(device.features)}
    failed = {
        event.result.name: event.result
        for event in last.values()
        if not isinstance(event.result, (Measured, Skip))
        and not (event.result.name in lacking and "lacks" in str(event.result))
    }
    assert not failed, f"candidates failed or disagreed with {tunables.candidates[0].name}: {failed}"
    return kernel, list(last.values())
