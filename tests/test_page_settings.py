"""The settings a page gives its tuner (its URL's ``?policy=fixed``), read as WGTUNE_* variables are."""

from __future__ import annotations

import pytest

from wgtune import ConfigError
from wgtune.backends.page_settings import page_config, settle_timeout
from wgtune.config import Policy

pytestmark = pytest.mark.core


def test_a_pages_settings_are_read_as_the_variables_are():
    config = page_config({"policy": "fixed", "budget": "0.5", "max_samples": 20})
    assert config.policy is Policy.FIXED and config.budget == 0.5 and config.max_samples == 20
    assert page_config({"wake": "0"}).wake == 0.0 and page_config({}).wake == 1.0  # ?wake=0: no wake


def test_a_wake_that_is_no_number_of_seconds_is_named_as_the_page_setting():
    with pytest.raises(ConfigError, match="the page setting wake="):
        page_config({"wake": "-1"})


@pytest.mark.parametrize(("settings", "problem"), [
    ({"cache_dir": "/tmp"}, "unknown page setting(s) cache_dir; known: policy, budget"),
    ({"budget": "abc"}, "the page setting budget="),
])
def test_a_bad_name_or_value_is_a_config_error_naming_it_as_the_page_setting(settings, problem):
    with pytest.raises(ConfigError) as error:
        page_config(settings)
    assert problem in str(error.value) and "WGTUNE_" not in str(error.value)


@pytest.mark.parametrize("timeout, shown", [("soon", '"soon"'), (None, "null"), (-1, "-1"), (float("nan"), "NaN"),
                                            (True, "true")])
def test_a_settle_timeout_that_is_no_number_of_seconds_is_a_config_error_naming_it(timeout, shown):
    with pytest.raises(ConfigError, match=f"settle: timeout is seconds, a finite number >= 0; got {shown}$") as raised:
        settle_timeout(timeout)
    assert raised.value.field == "timeout"
    assert settle_timeout(0) == 0.0 and settle_timeout(2.5) == 2.5
