"""The browser library as a directory a site copies (``wgtune.cli.library``): complete, relative, self-consistent."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from wgtune.cli.library import export_library, library_modules, main
from wgtune.cli.serve import checkout_root

WEB = checkout_root() / "web"
pytestmark = pytest.mark.skipif(not (WEB / "node_modules" / "pyodide" / "pyodide.mjs").is_file(),
                                reason="Pyodide is not installed (make setup)")


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    path = tmp_path / "wgtune-0.1.0-py3-none-any.whl"
    path.write_bytes(b"PK wheel")
    return path


def test_the_library_is_wgtune_js_and_the_modules_it_reaches_not_the_pages_own():
    modules = library_modules(WEB)
    assert {"wgtune.js", "python.js", "python-worker.js", "snapshots.js", "sets.js", "idb.js"} <= set(modules)
    assert not {"app.js", "dom.js", "keys.js", "events.js"} & set(modules)


def test_no_module_of_the_library_names_an_absolute_path():
    for name in library_modules(WEB):
        text = (WEB / name).read_text()
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("//", "*", "/*")))
        assert not re.search(r"""["'`]/[\w.-]""", code), f"{name} names an absolute path"  # "/pyodide/", "/idb.js"


def test_the_exported_directory_holds_everything_its_config_names(tmp_path, wheel):
    dest = tmp_path / "site" / "vendor" / "wgtune"
    written = export_library(dest, WEB, wheel)
    config = json.loads((dest / "wgtune-config.json").read_text())
    assert (dest / config["wheel"]).read_bytes() == b"PK wheel" and not config["wheel"].startswith("/")
    for name in ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"):
        assert (dest / "pyodide" / name).stat().st_size > 0
    for module in library_modules(WEB):
        assert (dest / module).read_bytes() == (WEB / module).read_bytes()
    package = json.loads((dest / "package.json").read_text())
    assert package["exports"] == {".": "./wgtune.js"} and package["type"] == "module"
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == written


def test_a_web_dir_without_pyodide_is_a_clear_error(tmp_path, wheel, capsys):
    web = tmp_path / "web"
    web.mkdir()
    for name in library_modules(WEB):
        (web / name).write_text((WEB / name).read_text())
    assert main([str(tmp_path / "out"), "--web-dir", str(web), "--wheel", str(wheel)]) == 1
    assert "make setup" in capsys.readouterr().err
