"""Configuration (API and WGTUNE_* variables), pins, logging, and the core's imports."""

from __future__ import annotations

import ast
import contextlib
import importlib.resources
import io
import logging
import sys

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet

import wgtune
from wgtune import Config, ConfigError, Hit, Key, LogLevel, MemoryStore, Pin, StoredEntry
from wgtune.config import DEFAULT_MIN_SAMPLE, DEFAULT_SAMPLES, DEFAULT_WARMUPS

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core



# -- from_env --------------------------------------------------------------------------------


def test_an_empty_environment_gives_the_defaults():
    config = Config.from_env(env={})
    assert config == Config()
    assert config.log_level is LogLevel.MINIMAL
    assert config.cache is True and config.checks is True and config.dry_run is False
    assert (config.warmups, config.samples, config.min_sample) == (DEFAULT_WARMUPS, DEFAULT_SAMPLES, DEFAULT_MIN_SAMPLE)
    assert config.cache_dir is None and config.records is None and config.pins == ()


def test_every_wgtune_variable_is_read():
    config = Config.from_env(
        env={
            "WGTUNE_LOG": " Full ",
            "WGTUNE_CACHE": "off",
            "WGTUNE_CACHE_DIR": "/tmp/wgtune-cache",
            "WGTUNE_RECORDS": "/tmp/records.jsonl",
            "WGTUNE_PIN": "matmul=tiled",
            "WGTUNE_CHECKS": "1",
            "WGTUNE_DRY_RUN": "yes",
            "WGTUNE_WARMUPS": "0",
            "WGTUNE_SAMPLES": "25",
            "WGTUNE_MIN_SAMPLE": "0.0005",
        }
    )
    assert config.log_level is LogLevel.FULL
    assert config.cache is False
    assert config.cache_dir == "/tmp/wgtune-cache"
    assert config.records == "/tmp/records.jsonl"
    assert config.pins == (Pin("matmul", "tiled"),)
    assert config.checks is True
    assert config.dry_run is True
    assert config.warmups == 0
    assert config.samples == 25
    assert config.min_sample == 0.0005


@pytest.mark.parametrize(
    ("raw", "value"),
    [("1", True), ("on", True), ("TRUE", True), ("0", False), ("off", False), ("no", False), ("", True)],
)
def test_flags_accept_on_off_and_one_zero(raw, value):
    assert Config.from_env(env={"WGTUNE_CACHE": raw}).cache is value


def test_empty_variables_keep_the_defaults():
    names = ("WGTUNE_LOG", "WGTUNE_SAMPLES", "WGTUNE_CACHE_DIR", "WGTUNE_PIN")
    config = Config.from_env(env=dict.fromkeys(names, ""))
    assert config == Config()


def test_from_env_overrides_win_over_the_environment():
    config = Config.from_env(env={"WGTUNE_SAMPLES": "5"}, samples=7, dry_run=True)
    assert config.samples == 7 and config.dry_run is True


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("WGTUNE_LOG", "verbose"),
        ("WGTUNE_CACHE", "maybe"),
        ("WGTUNE_CHECKS", "2"),
        ("WGTUNE_DRY_RUN", "sure"),
        ("WGTUNE_WARMUPS", "two"),
        ("WGTUNE_WARMUPS", "-1"),
        ("WGTUNE_WARMUPS", "1.5"),
        ("WGTUNE_SAMPLES", "0"),
        ("WGTUNE_SAMPLES", "ten"),
        ("WGTUNE_MIN_SAMPLE", "-0.1"),
        ("WGTUNE_MIN_SAMPLE", "1ms"),
        ("WGTUNE_PIN", "no-equals-sign"),
        ("WGTUNE_PIN", "matmul[n]=tiled"),
        ("WGTUNE_PIN", "matmul[=1]=tiled"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_variable(name, raw):
    with pytest.raises(ConfigError) as error:
        Config.from_env(env={name: raw})
    assert name in str(error.value)
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize("raw", ["nan", "inf"])
def test_a_min_sample_that_is_not_finite_is_a_config_error(raw):
    with pytest.raises(ConfigError, match="WGTUNE_MIN_SAMPLE"):
        Config.from_env(env={"WGTUNE_MIN_SAMPLE": raw})


def test_the_config_constructor_validates_too():
    assert Config(log_level="full").log_level is LogLevel.FULL
    for bad in ({"log_level": "loud"}, {"samples": 0}, {"warmups": -1}):
        with pytest.raises(ConfigError):
            Config(**bad)


# -- pins ------------------------------------------------------------------------------------


def test_wgtune_pin_parses_sets_key_filters_and_several_pins():
    config = Config.from_env(env={"WGTUNE_PIN": " matmul [ n = 1024 , dtype=f32 ] = tiled ;add=naive; "})
    assert config.pins == (Pin("matmul", "tiled", (("n", "1024"), ("dtype", "f32"))), Pin("add", "naive"))
    assert config.pin_for("matmul", Key({"n": 1024, "dtype": "f32", "extra": 1})) == "tiled"
    assert config.pin_for("matmul", Key({"n": 512, "dtype": "f32"})) is None
    assert config.pin_for("add", Key({"n": 3})) == "naive"
    assert config.pin_for("other", Key({"n": 3})) is None


def test_the_last_matching_pin_wins():
    config = Config(pins=(Pin("s", "a"), Pin("s", "b", (("n", "4"),))))
    assert config.pin_for("s", Key({"n": 4})) == "b"
    assert config.pin_for("s", Key({"n": 8})) == "a"


def test_a_pinned_candidate_runs_without_a_tune():
    device = FakeDevice()
    device.script("b", duration=1e-9)
    tunables = make_set("a", "b", "c")
    tuner = make_tuner(device, config=quiet(pins=(Pin("fake", "c"),)))
    assert tuner.execute(tunables, call(device, [1.0])).name == "c"
    assert device.profile_count == 0
    assert tuner.records.records == [] and tuner.store.entries == {}


def test_a_pin_from_the_environment_with_a_key_filter_pins_only_matching_keys():
    device = FakeDevice()
    device.script("b", duration=1e-4)
    tunables = make_set("a", "b", "c")
    config = Config.from_env(env={"WGTUNE_PIN": "fake[n=4]=c", "WGTUNE_LOG": "disabled"}, samples=2, min_sample=0.0)
    tuner = make_tuner(device, config=config)
    assert tuner.execute(tunables, call(device, [1.0], n=4)).name == "c"
    assert device.profile_count == 0
    assert tuner.execute(tunables, call(device, [1.0], n=8)).name == "b"
    assert device.profile_count > 0


def test_a_pin_naming_an_unknown_candidate_is_a_config_error_and_leaves_the_key_a_miss():
    device = FakeDevice()
    tunables = make_set("a", "b")
    tuner = make_tuner(device, config=quiet(pins=(Pin("fake", "nope"),)))
    args = call(device, [1.0])
    with pytest.raises(ConfigError, match=r"'nope'.*candidates: a, b"):
        tuner.execute(tunables, args)
    assert tuner.fastest(tunables, tuner.key(tunables, args)) is wgtune.MISS


def test_a_pin_overrides_a_stored_winner():
    device = FakeDevice()
    tunables = make_set("a", "b", "c")
    store = MemoryStore()
    store.save(StoredEntry("fake", Key({"n": 4}), tunables.checksum, 0, "a"))
    tuner = make_tuner(device, store=store, config=quiet(pins=(Pin("fake", "c"),)))
    assert tuner.execute(tunables, call(device, [1.0])).name == "c"


# -- logging ---------------------------------------------------------------------------------


def tune_and_log(caplog, level, names=("a", "b", "c", "d"), policy="adaptive"):
    device = FakeDevice()
    for rank, name in enumerate(names):
        device.script(name, duration=(rank + 1) * 1e-3)
    tunables = make_set(*names)
    caplog.set_level(logging.DEBUG, logger="wgtune")
    make_tuner(device, config=quiet(log_level=level, policy=policy)).execute(tunables, call(device, [1.0]))
    return [record.getMessage() for record in caplog.records if record.name == "wgtune"]


def test_minimal_logging_emits_one_line_with_the_winner_and_the_top_three(caplog):
    [line] = tune_and_log(caplog, "minimal")
    assert "fastest for fake [n=4]: a" in line
    assert "a=1.000 ms, b=2.000 ms, c=3.000 ms" in line
    assert "d=" not in line


def test_full_logging_emits_the_summary_every_step_and_every_result(caplog):
    lines = tune_and_log(caplog, "full", policy="fixed")
    assert "fastest for fake [n=4]: a" in lines[0]
    steps = [line for line in lines if line.startswith("  step: ")]
    results = [line for line in lines if line.startswith("  result: ")]
    assert any("batch [0, 1, 2, 3]" in step for step in steps)
    assert any("a: 3 of 3 samples valid" in step for step in steps)
    assert [line.split(":")[1].strip() for line in results] == ["a", "b", "c", "d"]
    assert "median 4.000 ms" in results[-1]


def test_full_logging_of_an_adaptive_tune_says_why_each_candidate_left(caplog):
    lines = tune_and_log(caplog, "full")
    assert "fastest for fake [n=4]: a" in lines[0]
    assert "vs b" in lines[0]  # the confidence statement names the runner-up
    steps = [line for line in lines if line.startswith("  step: ")]
    assert any(step.startswith("  step: d: out after") for step in steps)


def test_disabled_logging_emits_nothing(caplog):
    assert tune_and_log(caplog, "disabled") == []


def test_a_failed_tune_is_logged_as_a_warning_unless_disabled(caplog):
    device = FakeDevice()
    device.script("a", compile_error="x")
    device.script("b", compile_error="y")
    tunables = make_set("a", "b")
    caplog.set_level(logging.DEBUG, logger="wgtune")
    with pytest.raises(wgtune.NoValidKernelFound):
        make_tuner(device, config=quiet(log_level="minimal")).execute(tunables, call(device, [1.0]))
    [warning] = [r for r in caplog.records if r.name == "wgtune"]
    assert warning.levelno == logging.WARNING and "tune of fake [n=4] failed" in warning.getMessage()
    caplog.clear()
    with pytest.raises(wgtune.NoValidKernelFound):
        make_tuner(device, config=quiet(log_level="disabled")).execute(tunables, call(device, [1.0]))
    assert [r for r in caplog.records if r.name == "wgtune"] == []


def test_disabled_logging_stays_silent_when_a_stored_winner_is_stale(caplog):
    device = FakeDevice()
    tunables = make_set("a", "b")
    store = MemoryStore()
    store.save(StoredEntry("fake", Key({"n": 4}), "stale", 0, "a"))
    caplog.set_level(logging.DEBUG, logger="wgtune")
    assert make_tuner(device, store=store, config=quiet(log_level="disabled")).check_tune(
        tunables, Key({"n": 4}), call(device, [1.0])
    ) == Hit(0)
    assert [r.getMessage() for r in caplog.records if r.name == "wgtune"] == []


# -- the log shows by itself -----------------------------------------------------------------


@contextlib.contextmanager
def nothing_configured():
    """No handler on the root or the ``wgtune`` logger (pytest's own are on root while a test
    runs), standard error swapped for a buffer; every handler and level restored after."""
    root, wgtune_logger = logging.getLogger(), logging.getLogger("wgtune")
    saved = (root.handlers[:], wgtune_logger.handlers[:], wgtune_logger.level, sys.stderr)
    root.handlers.clear()
    wgtune_logger.handlers.clear()
    wgtune_logger.setLevel(logging.NOTSET)
    sys.stderr = io.StringIO()
    try:
        yield sys.stderr
    finally:
        root.handlers[:], wgtune_logger.handlers[:] = saved[0], saved[1]
        wgtune_logger.setLevel(saved[2])
        sys.stderr = saved[3]


def tune_quietly_configured(level: str) -> None:
    device = FakeDevice()
    device.script("a", duration=1e-3)
    device.script("b", duration=2e-3)
    config = quiet(log_level=level, log_to_stderr=True)
    make_tuner(device, config=config).execute(make_set("a", "b"), call(device, [1.0]))


def test_with_nothing_configured_a_tunes_line_goes_to_stderr_through_one_handler():
    with nothing_configured() as stderr:
        tune_quietly_configured("minimal")
        tune_quietly_configured("full")  # a second tuner attaches nothing more
        assert len(logging.getLogger("wgtune").handlers) == 1
    lines = stderr.getvalue().splitlines()
    summaries = [line for line in lines if line.startswith("wgtune: fastest for fake [n=4]: a; ")]
    assert len(summaries) == 2, lines  # one per tune, each once
    assert "top 3 medians: a=1.000 ms, b=2.000 ms" in summaries[0]
    assert any(line.startswith("wgtune:   result: b: median 2.000 ms") for line in lines), "full: every result"


def test_a_callers_handler_on_root_gets_the_lines_and_no_handler_is_added():
    records = []
    with nothing_configured() as stderr:
        caller = logging.Handler()
        caller.emit = records.append
        logging.getLogger().addHandler(caller)
        logging.getLogger("wgtune").setLevel(logging.INFO)
        tune_quietly_configured("minimal")
        assert logging.getLogger("wgtune").handlers == []
    assert stderr.getvalue() == ""
    assert ["fastest for fake" in record.getMessage() for record in records] == [True]


def test_without_asking_for_the_log_nothing_is_attached_or_printed():
    with nothing_configured() as stderr:
        device = FakeDevice()
        make_tuner(device, config=quiet(log_level="minimal")).execute(make_set("a", "b"), call(device, [1.0]))
        assert logging.getLogger("wgtune").handlers == []
    assert stderr.getvalue() == ""


def test_setting_wgtune_log_asks_for_the_log_on_stderr():
    assert Config.from_env({"WGTUNE_LOG": "minimal"}).log_to_stderr
    assert not Config.from_env({}).log_to_stderr


def test_disabled_attaches_nothing_and_prints_nothing():
    with nothing_configured() as stderr:
        tune_quietly_configured("disabled")
        assert logging.getLogger("wgtune").handlers == []
    assert stderr.getvalue() == ""


def test_the_auto_handler_stands_aside_once_the_caller_configures_logging_later():
    records = []
    with nothing_configured() as stderr:
        tune_quietly_configured("minimal")  # attaches wgtune's handler
        caller = logging.Handler()
        caller.emit = records.append
        logging.getLogger().addHandler(caller)  # the caller sets logging up afterwards
        tune_quietly_configured("minimal")
    assert len(records) == 1 and stderr.getvalue().count("fastest for") == 1  # each line shown once


# -- the core stays pure ---------------------------------------------------------------------

FORBIDDEN = {"wgpu", "js", "pyodide", "numpy", "platformdirs", "filelock", "rich"}


def python_files(folder, parts: tuple[str, ...] = ()):
    """``(parts, file)`` of every .py file under ``folder``: a directory, or a folder inside the
    zip the page imports the wheel from (``importlib.resources`` walks both)."""
    for item in folder.iterdir():
        if item.is_dir():
            yield from python_files(item, (*parts, item.name))
        elif item.name.endswith(".py"):
            yield (*parts, item.name), item


def test_the_core_imports_nothing_outside_the_standard_library_and_wgtune():
    # The core and its wings; in an installed wgtune the edges (backends, kernels, cli) sit inside it.
    files = sorted((parts, path) for parts, path in python_files(importlib.resources.files("wgtune"))
                   if parts[0] not in {"backends", "kernels", "cli"})
    assert len(files) >= 15
    offenders = []
    for _, path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in FORBIDDEN or (top not in sys.stdlib_module_names and top != "wgtune"):
                    offenders.append(f"{path.name}:{node.lineno}: {name}")
    assert offenders == []
