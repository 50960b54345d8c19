"""The ``wgtune`` command on the adapter present: tune twice, re-tune on change, cache, records."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet

from wgtune import TunableSet
from wgtune.backends.file_store import FileStore
from wgtune.backends.records import read_records
from wgtune.cli import main
from wgtune.kernels import demo
from wgtune.store.format import namespace_for


@pytest.fixture(autouse=True)
def quick_tunes(monkeypatch):
    """Fewer samples: these tests check what is tuned and kept, not how well."""
    monkeypatch.setenv("WGTUNE_SAMPLES", "3")
    monkeypatch.setenv("WGTUNE_WARMUPS", "1")
    for name in ("WGTUNE_CACHE", "WGTUNE_CACHE_DIR", "WGTUNE_RECORDS", "WGTUNE_PIN", "WGTUNE_DRY_RUN",
                 "WGTUNE_CHECKS", "WGTUNE_LOG", "WGTUNE_MIN_SAMPLE", "WGTUNE_POLICY", "WGTUNE_BUDGET",
                 "WGTUNE_MAX_SAMPLES", "WGTUNE_CONFIDENCE", "WGTUNE_TOLERANCE", "WGTUNE_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


def tune_json(capsys, *args: str) -> dict:
    assert main(["tune", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def demo_keys() -> int:
    return sum(len(case.sizes) for case in demo.demo_suite())


def test_second_run_is_all_hits_with_no_new_records(tmp_path, capsys):
    cache, records = tmp_path / "cache", tmp_path / "records.jsonl"
    first = tune_json(capsys, "--cache-dir", str(cache), "--records", str(records))
    assert len(first["keys"]) == demo_keys()
    assert {k["status"] for k in first["keys"]} == {"tuned"}
    assert {"set", "key", "winner", "status"} <= set(first["keys"][0])
    written = read_records(records)
    assert len(written) == demo_keys()
    for envelope, record in written:
        assert record.trials and record.stored and envelope["effect"] == "changed"

    for key in first["keys"]:  # every demo set has several candidates that run here
        sure = key["confidence"]
        assert sure["runner_up"] not in (None, key["winner"]) and 0 <= sure["p_faster"] <= 1
        assert sure["low"] <= sure["ratio"] <= sure["high"] and sure["level"] == 0.95

    second = tune_json(capsys, "--cache-dir", str(cache), "--records", str(records))
    assert {k["status"] for k in second["keys"]} == {"hit"}
    assert [k["winner"] for k in second["keys"]] == [k["winner"] for k in first["keys"]]
    assert [k["confidence"] for k in second["keys"]] == [k["confidence"] for k in first["keys"]], "kept in the store"
    assert len(read_records(records)) == demo_keys(), "a hit benchmarks nothing and records nothing"


def edited(tunables: TunableSet, index: int) -> TunableSet:
    candidates = list(tunables.candidates)
    candidates[index] = dataclasses.replace(candidates[index], wgsl=candidates[index].wgsl + "\n// edited\n")
    return TunableSet(
        tunables.name, candidates, tunables.key_function, outputs=tunables.outputs, input_gen=tunables.input_gen,
        output_type=tunables.output_type, atol=tunables.atol, rtol=tunables.rtol,
    )


def test_changing_one_candidates_wgsl_retunes_only_that_sets_keys(tmp_path, capsys, monkeypatch):
    cache = str(tmp_path / "cache")
    tune_json(capsys, "--cache-dir", cache)
    original = demo.demo_suite

    def suite_with_fma_edited():
        return [
            case._replace(tunables=edited(case.tunables, 1)) if case.tunables.name == "fma" else case
            for case in original()
        ]

    monkeypatch.setattr(demo, "demo_suite", suite_with_fma_edited)
    after = tune_json(capsys, "--cache-dir", cache)
    status = {(k["set"], json.dumps(k["key"], sort_keys=True)): k["status"] for k in after["keys"]}
    assert {s for (name, _), s in status.items() if name == "fma"} == {"tuned"}
    assert {s for (name, _), s in status.items() if name != "fma"} == {"hit"}


def test_dry_run_compiles_stores_nothing_and_records_say_so(tmp_path, capsys):
    cache, records = tmp_path / "cache", tmp_path / "records.jsonl"
    tune_json(capsys, "--cache-dir", str(cache), "--records", str(records), "--dry-run", "--only", "fma")
    written = read_records(records)
    assert written and all(r.dry_run and not r.stored and e["effect"] == "observed" for e, r in written)
    assert main(["cache", "--cache-dir", str(cache), "show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_cache_export_import_round_trip_and_a_bad_import_changes_nothing(tmp_path, capsys):
    cache, other = tmp_path / "cache", tmp_path / "other"
    tune_json(capsys, "--cache-dir", str(cache), "--only", "fma")
    exported = tmp_path / "winners.json"
    assert main(["cache", "--cache-dir", str(cache), "export", str(exported)]) == 0
    assert main(["cache", "--cache-dir", str(other), "import", str(exported)]) == 0
    capsys.readouterr()
    assert main(["cache", "--cache-dir", str(other), "show", "--json"]) == 0
    imported = json.loads(capsys.readouterr().out)
    assert main(["cache", "--cache-dir", str(cache), "show", "--json"]) == 0
    tuned_here = json.loads(capsys.readouterr().out)
    # An import is the same winners, not checked on this device (issue 25: checked once at first use).
    assert tuned_here and all(entry.get("checked") for entry in tuned_here)
    assert not any(entry.get("checked") for entry in imported)
    assert [{**entry, "checked": True} for entry in imported] == tuned_here

    before = {p.name: p.read_bytes() for p in other.iterdir()}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "wgtune.export/1", "namespaces": [{"format": "nope"}]}))
    assert main(["cache", "--cache-dir", str(other), "import", str(bad)]) == 2
    assert "not a wgtune cache document" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in other.iterdir()} == before

    assert main(["cache", "--cache-dir", str(other), "clear"]) == 0
    capsys.readouterr()
    assert main(["cache", "--cache-dir", str(other), "show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_records_of_a_missing_file_and_a_bundle_of_the_default_cache(tmp_path, capsys, monkeypatch):
    """``records`` of a file that is not there is exit 2 naming it, not "no records"; ``bundle OUT``
    with no sources reads the cache open_tuner writes (the platform's, without WGTUNE_CACHE_DIR)."""
    assert main(["records", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: no such file of records" in capsys.readouterr().err
    monkeypatch.delenv("WGTUNE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    tune_json(capsys, "--only", "fma")
    assert main(["bundle", str(tmp_path / "fleet.json")]) == 0
    assert "fma" in (tmp_path / "fleet.json").read_text()
    capsys.readouterr()
    assert main(["bundle", str(tmp_path / "nowhere" / "fleet.json")]) == 2
    assert "no such directory" in capsys.readouterr().err and not (tmp_path / "nowhere").exists()


def test_records_command_shows_every_trial_in_run_order(tmp_path, capsys):
    records = tmp_path / "records.jsonl"
    tune_json(capsys, "--no-cache", "--records", str(records), "--only", "matmul")
    assert main(["records", str(records)]) == 0
    shown = capsys.readouterr().out
    assert "matmul [" in shown and "observed (not stored)" in shown
    assert "policy adaptive" in shown and "confidence: " in shown and "P(winner faster)=" in shown
    (_, first), *_ = read_records(records)
    positions = [shown.index(f"{n}. {trial.name} ") for n, trial in enumerate(first.trials, 1)]
    assert positions == sorted(positions) and len(positions) == len(first.trials) >= 2


def test_the_tables_show_the_winners_confidence(tmp_path, capsys):
    cache = tmp_path / "cache"
    assert main(["tune", "--cache-dir", str(cache), "--only", "fma"]) == 0
    table = capsys.readouterr().out
    assert "confidence" in table and table.count(" p=") >= 2  # one a key: the demo tunes fma at two sizes
    assert main(["cache", "--cache-dir", str(cache), "show"]) == 0
    shown = capsys.readouterr().out
    assert "confidence" in shown and shown.count(" p=") >= 2


def test_cache_dir_is_accepted_before_or_after_the_action(tmp_path, capsys):
    assert main(["cache", "list", "--cache-dir", str(tmp_path / "after")]) == 0
    assert str(tmp_path / "after") in capsys.readouterr().out
    assert main(["cache", "--cache-dir", str(tmp_path / "before"), "list"]) == 0
    assert str(tmp_path / "before") in capsys.readouterr().out


def test_damaged_inputs_are_exit_2_not_tracebacks(tmp_path, capsys):
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["cache", "--cache-dir", str(tmp_path / "c"), "import", str(binary)]) == 2
    assert "not JSON" in capsys.readouterr().err
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"kind": "autotune", "effect": "changed", "at": "yesterday", "record": {
        "table": "t", "entry": {"key": {"n": 1}, "checksum": "c"}, "winner": 0, "trials": [], "wall": 0.1}}) + "\n")
    assert main(["records", str(records)]) == 0
    assert "t [n=1]" in capsys.readouterr().out


def test_unknown_set_and_bad_environment_are_clear_errors(tmp_path, capsys, monkeypatch):
    assert main(["tune", "--cache-dir", str(tmp_path), "--only", "nope"]) == 2
    assert "unknown set" in capsys.readouterr().err
    monkeypatch.setenv("WGTUNE_SAMPLES", "many")
    assert main(["tune", "--cache-dir", str(tmp_path)]) == 2
    assert "WGTUNE_SAMPLES" in capsys.readouterr().err


@pytest.mark.parametrize("argv, problem", [
    (["serve", "--port", "99999"], "99999 is not a port"),
    (["serve", "--port", "eighty"], "invalid port value"),
    (["cache", "import", "x.json", "--max-bytes", "0"], "give a number of bytes >= 1"),
])
def test_bad_command_line_values_are_usage_errors_not_tracebacks(argv, problem, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and problem in capsys.readouterr().err


def test_cache_show_candidates_lists_every_candidate_and_marks_an_early_median(tmp_path, capsys):
    device = FakeDevice()
    for name, seconds in {"best": 1.0e-3, "close": 1.05e-3, "hopeless": 10e-3}.items():
        device.script(name, duration=seconds)
    device.script("broken", compile_error="bad [wgsl]")
    cache = tmp_path / "cache"
    store = FileStore(cache, namespace_for(device.identity))
    make_tuner(device, store=store, config=quiet()).execute(make_set("best", "close", "hopeless", "broken"),
                                                            call(device, [1.0]))

    assert main(["cache", "--cache-dir", str(cache), "show"]) == 0
    default = capsys.readouterr().out
    assert "best (#0)" in default and "hopeless" not in default and "eliminated early" not in default

    assert main(["cache", "--cache-dir", str(cache), "show", "--candidates"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(default.rstrip("\n"))  # the summary table as it was, then the candidates
    assert "fake [n=4] on fake-gpu: 4 candidates" in shown
    candidates = shown.split("fake [n=4] on fake-gpu: 4 candidates", 1)[1]
    rows = {line.split("│")[2].strip(): line for line in candidates.splitlines() if line.count("│") > 5}
    assert list(rows) == ["best (winner)", "close", "hopeless", "broken"]  # winner, by median, failures
    assert "1.000 ms" in rows["best (winner)"] and "~" not in rows["best (winner)"]
    assert "~10.000 ms" in rows["hopeless"] and "eliminated early" in rows["hopeless"]
    assert " 2 " in rows["hopeless"].split("│")[5]  # its first sample over twice the leader's, and one more
    assert "Launch: compile failed: bad [wgsl]" in rows["broken"]
    assert "~ eliminated early, after fewer than 5 samples" in shown


def test_the_cli_prints_each_log_line_once():
    """The CLI's own handler shows the tune log; wgtune's stderr handler must not print it again."""
    env = {**os.environ, "WGTUNE_SAMPLES": "3", "WGTUNE_WARMUPS": "1"}
    command = "import sys; from wgtune.cli import main; sys.exit(main())"
    tuned = subprocess.run(
        [sys.executable, "-c", command, "tune", "--only", "fma", "--no-cache", "--log-level", "minimal"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert tuned.returncode == 0, tuned.stderr
    lines = [line for line in tuned.stderr.splitlines() if "fastest for fma [" in line]
    keys = {line.split("]")[0] for line in lines}
    assert lines and len(lines) == len(keys), tuned.stderr  # one line per key tuned


def test_tune_seeds_from_a_bundle_given_by_flag_or_environment_and_tunes_nothing(tmp_path, capsys, monkeypatch):
    first = tune_json(capsys, "--only", "fma", "--cache-dir", str(tmp_path / "tuned"))
    assert {k["status"] for k in first["keys"]} == {"tuned"}
    bundle = tmp_path / "fleet.json"
    assert main(["bundle", str(bundle), str(tmp_path / "tuned")]) == 0
    capsys.readouterr()
    seeded = tune_json(capsys, "--only", "fma", "--cache-dir", str(tmp_path / "fresh"), "--bundle", str(bundle))
    assert {k["status"] for k in seeded["keys"]} == {"hit"}  # checked once here, never tuned
    assert [k["winner"] for k in seeded["keys"]] == [k["winner"] for k in first["keys"]]
    monkeypatch.setenv("WGTUNE_BUNDLE", str(bundle))
    from_env = tune_json(capsys, "--only", "fma", "--cache-dir", str(tmp_path / "other"))
    assert {k["status"] for k in from_env["keys"]} == {"hit"}
    monkeypatch.setenv("WGTUNE_BUNDLE", str(tmp_path / "missing.json"))
    assert main(["tune", "--only", "fma", "--cache-dir", str(tmp_path / "other")]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_a_library_user_who_set_no_logging_sees_no_lines_unless_wgtune_log_asks():
    """With WGTUNE_LOG unset and no handler anywhere, a tune's warnings (candidate 0 wrong here) go
    nowhere, not to Python's last-resort handler; WGTUNE_LOG=minimal prints them."""
    script = (
        f"import dataclasses, sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "from fakes import FakeDevice, call, double_into, make_set, make_tuner\n"
        "import wgtune\n"
        "device = FakeDevice()\n"
        "device.script('ref', kernel=double_into, wrong=True)\n"
        "for name in ('a', 'b'): device.script(name, kernel=double_into)\n"
        "config = dataclasses.replace(wgtune.Config.from_env(), samples=3, warmups=1, min_sample=0.0)\n"
        "make_tuner(device, config=config).execute(make_set('ref', 'a', 'b', outputs=(1,)), "
        "call(device, [1.0], [0.0]))\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "WGTUNE_LOG"}
    quiet_run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert quiet_run.returncode == 0, quiet_run.stderr
    assert quiet_run.stderr == ""
    told = subprocess.run([sys.executable, "-c", script], env={**env, "WGTUNE_LOG": "minimal"}, capture_output=True,
                          text=True, timeout=120)
    assert told.returncode == 0 and "candidate 0 (ref), the set's default, is wrong here" in told.stderr, told.stderr


def test_an_export_into_a_pipe_its_reader_closed_ends_quietly(tmp_path):
    """`wgtune cache export - | head -c 100`: the reader leaves early; no traceback, no error line."""
    from wgtune import Key, StoredEntry
    from wgtune.backends.sqlite_store import SqliteStore

    results = ({"name": "a", "index": 0, "median": 0.002, "samples": [0.002] * 20},)
    entries = [StoredEntry("matmul", Key({"n": n, "pad": "x" * 200}), "c0ffee", 0, "a", results) for n in range(3000)]
    store = SqliteStore(tmp_path, {"wgtune": "0.1", "device": {"device": "d"}, "tuner": "default"})
    store.save_many(entries)  # an export of about 2 MB: far more than a pipe holds
    store.database.close()
    command = "import sys; from wgtune.cli import main; sys.exit(main())"
    process = subprocess.Popen([sys.executable, "-c", command, "cache", "--cache-dir", str(tmp_path), "export", "-"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.read(100).startswith(b"{")
    process.stdout.close()
    error = process.stderr.read().decode()
    assert process.wait(timeout=120) == 1 and error == "", error


def test_ctrl_c_ends_a_command_with_one_line_and_status_130_not_a_traceback(monkeypatch, capsys, tmp_path):
    import wgtune.cli.cache as cache_command

    def interrupted(_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache_command, "run_cache", interrupted)
    assert main(["cache", "--cache-dir", str(tmp_path), "list"]) == 130
    assert capsys.readouterr().err == "wgtune: interrupted\n"
