"""wgtune's browser library as an npm package: ``python -m wgtune.cli.npm_package [--out DIR]`` (``make npm``).

The package is ``npm/package.json`` with the Python package's version added. At its root: the
library's ES modules (``wgtune.js`` and what it imports), ``wgtune.d.ts`` as it is in ``web/``, and
the ``wgtune-assets`` command; under ``assets/``: what the library loads by URL at run time (the
wheel, ``wgtune-config.json`` naming it, the worker's modules), which an app copies where it serves
them (``npx wgtune-assets public/wgtune``) with Pyodide's runtime. Pyodide is a dependency pinned to
the page's own (``web/package.json``), not a copy inside the package: ``npm install`` brings it
from the registry or npm's cache. ``npm pack`` makes ``DIR/wgtune-VERSION.tgz`` (default ``build/``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import wgtune

from .library import LIBRARY_TYPES, library_modules, write_files
from .serve import build_wheel, checkout_root, wheel_url

__all__ = ["WORKER", "build_package", "pack", "package_files"]

WORKER = "python-worker.js"  # the worker's script: looked for under the base URL, so it is an asset
ASSETS_COMMAND = "wgtune-assets.js"


def _manifest(npm_dir: Path, web_dir: Path) -> dict:
    """``npm/package.json`` with the version added, its Pyodide checked against the page's pin."""
    package = json.loads((npm_dir / "package.json").read_text(encoding="utf-8"))
    page = json.loads((web_dir / "package.json").read_text(encoding="utf-8"))
    ours, pinned = package.get("dependencies", {}).get("pyodide"), page["dependencies"]["pyodide"]
    if ours != pinned:
        raise ValueError(f"{npm_dir / 'package.json'} depends on pyodide {ours!r}, but the page pins {pinned!r} "
                         f"({web_dir / 'package.json'}): the wheel is tested on the page's; make them the same")
    if "version" in package:
        raise ValueError(f"{npm_dir / 'package.json'} names a version: it is the Python package's, added by the build")
    return {"name": package.pop("name"), "version": wgtune.__version__, **package}


def package_files(root: Path, wheel: Path) -> dict[str, Path | bytes]:
    """The package's contents: relative path -> the file to copy, or the bytes to write."""
    web, npm = root / "web", root / "npm"
    files: dict[str, Path | bytes] = {name: web / name for name in library_modules(web)}
    files[LIBRARY_TYPES] = web / LIBRARY_TYPES
    files.update({f"assets/{name}": web / name for name in library_modules(web, WORKER)})
    path = wheel_url(wheel)
    files[f"assets/{path}"] = wheel
    files["assets/wgtune-config.json"] = json.dumps({"wheel": path, "version": wgtune.__version__}).encode()
    files[ASSETS_COMMAND] = npm / ASSETS_COMMAND
    files["README.md"] = npm / "README.md"
    files["package.json"] = (json.dumps(_manifest(npm, web), indent=2) + "\n").encode()
    missing = [str(source) for source in files.values() if isinstance(source, Path) and not source.is_file()]
    if missing:
        raise OSError(f"the npm package's files are incomplete: missing {', '.join(missing)}")
    return files


def build_package(dest: Path, root: Path, wheel: Path) -> list[str]:
    """Write the package's directory at ``dest`` (emptied first); the relative paths written."""
    files = package_files(root, wheel)
    shutil.rmtree(dest, ignore_errors=True)
    return write_files(dest, files)


def pack(package_dir: Path, out: Path) -> tuple[Path, dict]:
    """``npm pack`` of ``package_dir`` into ``out``: the tarball and what npm said of it (files, sizes)."""
    out.mkdir(parents=True, exist_ok=True)
    command = ["npm", "pack", "--json", "--pack-destination", str(out.resolve())]
    try:
        done = subprocess.run(command, cwd=package_dir, capture_output=True, text=True)
    except FileNotFoundError as error:
        raise OSError("npm is not installed (scripts/setup.sh installs it)") from error
    if done.returncode != 0:
        raise OSError(f"`{' '.join(command)}` in {package_dir} failed:\n{done.stderr.strip()}")
    report = json.loads(done.stdout)[0]
    return out / report["filename"], report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wgtune.cli.npm_package", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="where the tarball goes (default: the checkout's build/)")
    args = parser.parse_args(argv)
    root = checkout_root()
    out = Path(args.out) if args.out else root / "build"
    try:
        build_package(root / "build" / "npm" / "package", root, build_wheel(root, root / "build" / "web"))
        tarball, report = pack(root / "build" / "npm" / "package", out)
    except (OSError, ValueError) as error:
        print(f"wgtune: {error}", file=sys.stderr)
        return 1
    print(f"wgtune: packed {tarball} ({report['entryCount']} files, {report['size'] / 1e6:.2f} MB; "
          f"unpacked {report['unpackedSize'] / 1e6:.2f} MB): npm install {tarball}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
