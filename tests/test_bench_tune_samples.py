"""bench/tune_samples.py on the adapter present: a fresh tune per setting, each measured candidate's
samples beside its time on an idle queue and in a burst of passes, the settings' variables restored after (no figure is
compared: the machine's load moves them)."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import tune_samples


def test_each_setting_tunes_afresh_and_each_candidate_gets_its_samples_and_idle_time(capsys, monkeypatch):
    monkeypatch.delenv("WGTUNE_CHECKS", raising=False)
    assert tune_samples.main(["--key", "fma:3000", "--setting", "default", "--setting", "WGTUNE_CHECKS=0",
                              "--rounds", "1", "--shown", "2", "--burst", "3"]) == 0
    assert "WGTUNE_CHECKS" not in os.environ  # the setting held for its tune only
    lines = capsys.readouterr().out.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("fma:3000 [")]
    assert [lines[i].split("]")[0] for i in heads] == ["fma:3000 [default", "fma:3000 [WGTUNE_CHECKS=0"]
    for start, end in zip(heads, [*heads[1:], len(lines)], strict=True):
        rows = lines[start + 1 : end]
        assert rows, lines[start]
        for row in rows:
            cells = row.split()
            figures = [float(cells[cells.index(word) + 1]) for word in ("median", "idle", "burst")]
            assert all(math.isfinite(value) and value > 0 for value in figures), row
            samples = row.split("samples:")[1].split("...")[0].split()
            assert 1 <= len(samples) <= 2, row  # --shown 2


def test_a_setting_is_default_or_wgtune_variables():
    assert tune_samples.setting_env("default") == {}
    assert tune_samples.setting_env("WGTUNE_CHECKS=0,WGTUNE_MIN_SAMPLE=0.01") == {
        "WGTUNE_CHECKS": "0", "WGTUNE_MIN_SAMPLE": "0.01"}
    with pytest.raises(SystemExit, match="WGTUNE_NAME=VALUE"):
        tune_samples.setting_env("CHECKS=0")
    with pytest.raises(SystemExit, match="WGTUNE_NAME=VALUE"):
        tune_samples.setting_env("WGTUNE_CHECKS")
