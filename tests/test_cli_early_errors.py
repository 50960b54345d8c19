"""``wgtune`` refuses bad input before it does any work, and names what the user gave; a dry run
leaves no database behind."""

from __future__ import annotations

import json

import pytest

from wgtune import Key, StoredEntry
from wgtune.cli import main
from wgtune.kernels import demo


@pytest.fixture(autouse=True)
def quick_tunes(monkeypatch):
    """Few samples, and no setting of the environment's: these tests check what is made, not timings."""
    monkeypatch.setenv("WGTUNE_SAMPLES", "3")
    monkeypatch.setenv("WGTUNE_WARMUPS", "1")
    for name in ("WGTUNE_CACHE", "WGTUNE_CACHE_DIR", "WGTUNE_RECORDS", "WGTUNE_PIN", "WGTUNE_DRY_RUN",
                 "WGTUNE_CHECKS", "WGTUNE_LOG", "WGTUNE_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


def test_an_unknown_only_set_is_a_usage_error_before_any_device_or_store_is_opened(tmp_path, capsys, monkeypatch):
    import wgtune.backends.local as local

    def no_tuner(*_args, **_kwargs):
        raise AssertionError("a device and a store were opened for a command line that names an unknown set")

    monkeypatch.setattr(local, "open_tuner", no_tuner)
    cache = tmp_path / "cache"
    assert main(["tune", "--cache-dir", str(cache), "--only", "fma", "--only", "nosuchset"]) == 2
    out, err = capsys.readouterr()
    known = ", ".join(case.tunables.name for case in demo.demo_suite())
    assert out == "" and err == f"wgtune: error: --only: unknown set(s) nosuchset; sets: {known}\n"
    assert not cache.exists()


def test_an_export_into_a_missing_directory_names_the_path_given_and_leaves_nothing(tmp_path, capsys):
    from wgtune.backends.sqlite_store import SqliteStore

    cache = tmp_path / "cache"
    results = ({"name": "a", "index": 0, "median": 0.002, "samples": [0.002] * 5},)
    store = SqliteStore(cache, {"wgtune": "0.1", "device": {"device": "d"}, "tuner": "default"})
    store.save_many([StoredEntry("fma", Key({"n": 1}), "c0ffee", 0, "a", results)])
    store.database.close()
    before = sorted(tmp_path.rglob("*"))
    target = tmp_path / "nowhere" / "winners.json"
    assert main(["cache", "--cache-dir", str(cache), "export", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and ".partial" not in err
    assert err == f"wgtune: error: cannot export to {target}: no such directory {str(target.parent)!r}\n"
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_a_dry_run_with_nothing_stored_makes_no_database(tmp_path, capsys, monkeypatch, how):
    cache = tmp_path / "cache"
    dry = ["--dry-run"] if how == "flag" else []
    if how == "environment":
        monkeypatch.setenv("WGTUNE_DRY_RUN", "1")
    assert main(["tune", "--cache-dir", str(cache), "--only", "fma", *dry]) == 0
    assert not cache.exists()
    said = " ".join(capsys.readouterr().err.split())  # as Rich wrapped it to the console's width
    assert "a dry run stores nothing (no database made)" in said
    assert main(["tune", "--json", "--cache-dir", str(cache), "--only", "fma", *dry]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dry_run"] and {key["status"] for key in summary["keys"]} == {"tuned"}
    assert not cache.exists()


def test_a_dry_run_still_reads_the_winners_stored(tmp_path, capsys):
    cache = tmp_path / "cache"
    assert main(["tune", "--json", "--cache-dir", str(cache), "--only", "fma"]) == 0
    tuned = json.loads(capsys.readouterr().out)["keys"]
    assert main(["tune", "--json", "--cache-dir", str(cache), "--only", "fma", "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)["keys"]
    assert {key["status"] for key in dry} == {"hit"}
    assert [key["winner"] for key in dry] == [key["winner"] for key in tuned]
