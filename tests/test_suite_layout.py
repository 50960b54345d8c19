"""The suite's own layout: pytest imports test modules by basename (rootdir, no packages), so two
modules of one name in tests/ and e2e/ stop the collection of the whole suite."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_no_two_test_modules_share_a_basename():
    names = Counter(path.name for folder in ("tests", "e2e") for path in (ROOT / folder).glob("*.py"))
    assert [name for name, count in names.items() if count > 1 and name != "__init__.py"] == []
