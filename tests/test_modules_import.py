"""Every module of the package imports here, but those that say they are importable only in Pyodide.

A module that no test imports can be broken by a change elsewhere (a name moved to another
module) and nobody finds out until it is run: ``backends/dawn.py`` once imported a helper that had
moved, and only a bench script starting on the H200 would have said so. The packages are the ones
pyproject.toml maps (``[tool.setuptools.package-dir]``), so a new one is covered too. The imports
run in a child process: importing every module must not change this one's state for other tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import importlib, json, pkgutil, sys
from pathlib import Path

imported, browser_only, broken = [], [], {}
for top in json.loads(sys.argv[1]):
    package = importlib.import_module(top)
    for found in pkgutil.walk_packages(package.__path__, top + "."):
        try:
            importlib.import_module(found.name)
        except ModuleNotFoundError as error:
            source = Path(found.module_finder.path) / (found.name.rsplit(".", 1)[-1] + ".py")
            if error.name in ("js", "pyodide") and "Importable only in Pyodide" in source.read_text():
                browser_only.append(found.name)
            else:
                broken[found.name] = repr(error)
        except Exception as error:  # each module's failure is reported, not only the first
            broken[found.name] = repr(error)
        else:
            imported.append(found.name)
print(json.dumps({"imported": imported, "browser_only": browser_only, "broken": broken}))
"""


def packages() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["tool"]["setuptools"]["package-dir"])


def test_every_module_imports_but_the_ones_that_say_they_need_pyodide():
    child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(packages())], capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
    assert child.returncode == 0, child.stderr
    found = json.loads(child.stdout.strip().splitlines()[-1])
    assert found["broken"] == {}
    assert "wgtune.backends.dawn" in found["imported"] and "wgtune.backends.native_adapters" in found["imported"]
    assert "wgtune.backends.page" in found["browser_only"]  # the rule is applied, not everything skipped
    assert len(found["imported"]) > 100
