"""bench/page_checks.py's check in the page, on Chromium's WebGPU: the built-in candidates compiled by
Tint and run on the page's device give their family's reference on NaN-filled outputs, and a
reference they do not meet makes every one of them wrong (the comparison is real)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
from page_checks import IN_PAGE

RUN = """([code, shapes]) => window.wgtune.pyodide.runPythonAsync(code,
    {globals: window.wgtune.pyodide.toPy({SHAPES: shapes})})"""
# Odd sizes, small enough for pure-Python references: fma's planned candidates, a reduction's.
SHAPES = {"fma": [[[1001], None]], "row_sum": [[[37, 19], None]], "row_max": [[[5, 300], None]]}

OFF_BY_ONE = r"""
from dataclasses import replace
from wgtune.kernels import families

index = families.family_names().index("fma")
real = families.FAMILIES[index]
families.FAMILIES[index] = replace(real, reference=lambda xs, params: [v + 1 for v in real.reference(xs, params)])
"""


def _checked(page, shapes: dict) -> dict:
    return json.loads(page.evaluate(RUN, [IN_PAGE, json.dumps(shapes)]))


def test_every_planned_candidate_gives_the_reference_in_the_page(browser):
    page, log = browser.open()
    found = _checked(page, SHAPES)
    assert [row["shape"] for row in found["rows"]] == ["fma 1001", "row_sum 37x19", "row_max 5x300"]
    for row in found["rows"]:
        assert row["wrong"] == {} and row["failed"] == {} and row["refused"] == {}, row
        assert row["right"] >= 4 and row["skipped"] >= 1, row  # the plan serves some, not all
    assert found["pipelines"] == sum(row["right"] for row in found["rows"])
    page.evaluate("(code) => window.wgtune.pyodide.runPythonAsync(code)", OFF_BY_ONE)
    off = _checked(page, {"fma": [[[1001], None]]})["rows"][0]
    assert off["right"] == 0 and len(off["wrong"]) == found["rows"][0]["right"]
    assert all(why.startswith("1001 of 1001 values differ") for why in off["wrong"].values())
    assert log.errors == []
    page.close()
