"""A device lost mid-tune names the candidate whose launches were in hand, and which of them."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet

from wgtune import DeviceLost

pytestmark = pytest.mark.core


def lost() -> DeviceLost:
    return DeviceLost("unknown: the GPU watchdog reset it")


def test_a_device_lost_in_a_candidate_s_calibration_names_it():
    device = FakeDevice()
    device.script("b", profile_error=lost())  # its first launch and check pass; its first timed pass does not
    tuner = make_tuner(device, config=quiet())
    with pytest.raises(DeviceLost, match=r"reset it \(during the warmups and calibration of b\)") as raised:
        tuner.execute(make_set("a", "b"), call(device, [1.0]))
    assert raised.value.candidate == "b" and raised.value.reason == "unknown: the GPU watchdog reset it"


def test_a_device_lost_in_a_timed_sample_names_the_candidate_sampled():
    device = FakeDevice()
    profiles: dict[str, int] = {}

    def count(name: str, repeats: int) -> None:
        profiles[name] = profiles.get(name, 0) + 1
        if name == "a" and profiles[name] == 3:  # calibrated (two readings), then sampled
            device.script("a", profile_error=lost())

    device.on_profile = count
    tuner = make_tuner(device, config=quiet())
    with pytest.raises(DeviceLost, match=r"\(during a timed sample of a\)"):
        tuner.execute(make_set("a", "b"), call(device, [1.0]))


def test_a_device_lost_in_a_first_launch_still_says_so():
    device = FakeDevice()
    device.script("b", loses_device=True)
    tuner = make_tuner(device, config=quiet())
    with pytest.raises(DeviceLost, match=r"\(during the first launch of b\)"):
        tuner.execute(make_set("a", "b"), call(device, [1.0]))


def test_what_a_rule_out_after_the_loss_says_of_the_candidate_s_launches():
    # backends/page_reopen.py rules the candidate out with it (the page's reopened device).
    assert DeviceLost("r", candidate="a").its_launches == "its first launch"
    assert DeviceLost("r", candidate="a", during="a timed sample").its_launches == "a timed sample of it"
    assert DeviceLost("r", "a", "the warmups and calibration").its_launches == "the warmups and calibration of it"
