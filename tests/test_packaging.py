"""One import root, `wgtune`, mapped onto the top-level folders (core, backends, kernels, cli), in the wheel too."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_one_import_root_with_every_subpackage(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("wgtune-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"wgtune"}
    for module in ("wgtune/__init__.py", "wgtune/tuner.py", "wgtune/backends/native.py",
                   "wgtune/backends/file_store.py", "wgtune/kernels/matmul/__init__.py",
                   "wgtune/kernels/reduction/wgsl.py", "wgtune/cli/__init__.py"):
        assert module in names, module
    assert not any("tests/" in name or name.startswith("core/") for name in names)


def test_the_installed_package_imports_from_the_source_folders():
    import wgtune
    import wgtune.backends.native
    import wgtune.kernels.matmul

    assert Path(wgtune.__file__).parent == ROOT / "core"
    assert Path(wgtune.backends.native.__file__).parent == ROOT / "backends"
    assert Path(wgtune.kernels.matmul.__file__).parent == ROOT / "kernels" / "matmul"
