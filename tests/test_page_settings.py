"""The settings a page gives its tuner (its URL's ``?policy=fixed``), read as WGTUNE_* variables are."""

from __future__ import annotations

import pytest

from wgtune import ConfigError
from wgtune.backends.page_settings import page_config
from wgtune.config import Policy

pytestmark = pytest.mark.core


def test_a_pages_settings_are_read_as_the_variables_are():
    config = page_config({"policy": "fixed", "budget": "0.5", "max_samples": 20})
    assert config.policy is Policy.FIXED and config.budget == 0.5 and config.max_samples == 20


@pytest.mark.parametrize(("settings", "problem"), [
    ({"cache_dir": "/tmp"}, "unknown page setting(s) cache_dir; known: policy, budget"),
    ({"budget": "abc"}, "the page setting budget="),
])
def test_a_bad_name_or_value_is_a_config_error_naming_it_as_the_page_setting(settings, problem):
    with pytest.raises(ConfigError) as error:
        page_config(settings)
    assert problem in str(error.value) and "WGTUNE_" not in str(error.value)
