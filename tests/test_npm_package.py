"""The browser library as an npm package (``wgtune.cli.npm_package``): its contents, its manifest,
and the ``wgtune-assets`` command. The packed tarball installed and used by an app is e2e/test_npm_app.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import wgtune
from wgtune.cli.library import PYODIDE_FILES, library_modules
from wgtune.cli.npm_package import build_package, package_files
from wgtune.cli.serve import checkout_root

ROOT = checkout_root()


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    path = tmp_path / "wgtune-0.1.0-py3-none-any.whl"
    path.write_bytes(b"PK wheel")
    return path


def _checkout_copy(tmp_path: Path) -> Path:
    """The parts of the checkout the package is made of, to alter without touching the real ones."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "npm", root / "npm")
    shutil.copytree(ROOT / "web", root / "web", ignore=shutil.ignore_patterns("node_modules"))
    return root


def test_the_package_holds_the_modules_and_types_at_its_root_and_the_runtime_assets_apart(tmp_path, wheel):
    written = build_package(tmp_path / "package", ROOT, wheel)
    assert set(library_modules(ROOT / "web")) | {"wgtune.d.ts", "wgtune-assets.js", "README.md"} <= set(written)
    assert {f"assets/{name}" for name in ("python-worker.js", "python.js", "snapshots.js")} <= set(written)
    config = json.loads((tmp_path / "package" / "assets" / "wgtune-config.json").read_text())
    assert config["version"] == wgtune.__version__
    assert (tmp_path / "package" / "assets" / config["wheel"]).read_bytes() == b"PK wheel"
    assert not [path for path in written if "pyodide" in path]  # Pyodide is a dependency, not a copy
    manifest = json.loads((tmp_path / "package" / "package.json").read_text())
    assert manifest["name"] == "wgtune" and manifest["version"] == wgtune.__version__
    assert manifest["exports"]["."] == {"types": "./wgtune.d.ts", "default": "./wgtune.js"}
    pinned = json.loads((ROOT / "web" / "package.json").read_text())["dependencies"]["pyodide"]
    assert manifest["dependencies"] == {"pyodide": pinned}


def test_a_pyodide_other_than_the_pages_is_refused_naming_both(tmp_path, wheel):
    root = _checkout_copy(tmp_path)
    manifest = json.loads((root / "npm" / "package.json").read_text())
    manifest["dependencies"]["pyodide"] = "0.27.0"
    (root / "npm" / "package.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"depends on pyodide '0\.27\.0', but the page pins '\d"):
        package_files(root, wheel)


def test_a_version_written_in_the_template_is_refused(tmp_path, wheel):
    root = _checkout_copy(tmp_path)
    manifest = json.loads((root / "npm" / "package.json").read_text())
    (root / "npm" / "package.json").write_text(json.dumps({**manifest, "version": "9.9.9"}))
    with pytest.raises(ValueError, match="names a version: it is the Python package's"):
        package_files(root, wheel)


def test_wgtune_assets_copies_the_files_pyodide_loads():
    text = (ROOT / "npm" / "wgtune-assets.js").read_text()
    listed = re.search(r"const PYODIDE_FILES = \[(.*?)\];", text, re.DOTALL).group(1)
    assert re.findall(r'"([^"]+)"', listed) == list(PYODIDE_FILES)


def test_wgtune_assets_without_pyodide_installed_says_so(tmp_path, wheel):
    build_package(tmp_path / "node_modules" / "wgtune", ROOT, wheel)  # no node_modules/pyodide beside it
    command = ["node", str(tmp_path / "node_modules" / "wgtune" / "wgtune-assets.js")]
    done = subprocess.run([*command, str(tmp_path / "public")], capture_output=True, text=True)
    assert done.returncode == 1 and "Pyodide is not installed beside wgtune" in done.stderr
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 2 and "usage: wgtune-assets DIR" in done.stderr
