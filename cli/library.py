"""wgtune's browser library as a directory a site copies and serves: ``python -m wgtune.cli.library DIR``.

The library is a few ES modules (``wgtune.js`` and what it imports), Pyodide's runtime, the
wgtune wheel and a config naming it. ``wgtune.js`` finds every asset relative to its own URL (or
the ``baseUrl`` given to ``loadWgtune``), so the directory works under any path of any static
server: ``/vendor/wgtune/wgtune.js``, ``/vendor/wgtune/pyodide/...``. It is the same layout that
``wgtune serve`` serves at ``/`` (``serve.py``), and it carries a ``package.json`` whose
``exports`` name ``wgtune.js``, for import maps and bundlers that read one.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

import wgtune

from .serve import build_wheel, checkout_root, wheel_url

__all__ = ["ENTRY", "PYODIDE_FILES", "export_library", "library_files", "library_modules"]

ENTRY = "wgtune.js"  # the library's module; the others are what it imports
LIBRARY_TYPES = "wgtune.d.ts"
# A module beside it: a static import or re-export (`from "./sets.js"`, `import "./x.js"`), or a
# worker's script (`new URL("./python-worker.js", import.meta.url)`).
RELATIVE_IMPORT = re.compile(
    r"""(?:\bfrom\s*|^\s*import\s*|\bnew URL\(\s*)["']\./([\w.-]+\.m?js)["']""", re.MULTILINE)
# What Pyodide loads at run time (its package.json carries its version and licence).
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json",
                 "package.json")


def library_modules(web_dir: Path, entry: str = ENTRY) -> list[str]:
    """``entry`` (``wgtune.js``) and every module it imports, directly or not (the page's own modules
    are not among them)."""
    found, waiting = [], [entry]
    while waiting:
        name = waiting.pop()
        if name in found:
            continue
        found.append(name)
        path = web_dir / name
        if not path.is_file():
            raise OSError(f"the library's module {path} is missing")
        waiting.extend(RELATIVE_IMPORT.findall(path.read_text(encoding="utf-8")))
    return sorted(found)


def library_files(web_dir: Path, wheel: Path) -> dict[str, Path | bytes]:
    """The library directory's contents: relative path -> the file to copy, or the bytes to write."""
    pyodide = web_dir / "node_modules" / "pyodide"
    files: dict[str, Path | bytes] = {name: web_dir / name for name in library_modules(web_dir)}
    if (web_dir / LIBRARY_TYPES).is_file():
        files[LIBRARY_TYPES] = web_dir / LIBRARY_TYPES
    files.update({f"pyodide/{name}": pyodide / name for name in PYODIDE_FILES})
    wheel_path = wheel_url(wheel)
    files[wheel_path] = wheel
    files["wgtune-config.json"] = json.dumps({"wheel": wheel_path, "version": wgtune.__version__}).encode()
    package = {
        "name": "wgtune", "version": wgtune.__version__, "type": "module",
        "description": "wgtune in the browser: autotunes WebGPU compute kernels (Pyodide, served from this directory).",
        "exports": {".": "./wgtune.js"},
        **({"types": f"./{LIBRARY_TYPES}"} if LIBRARY_TYPES in files else {}),
    }
    files["package.json"] = (json.dumps(package, indent=2) + "\n").encode()
    missing = [str(source) for source in files.values() if isinstance(source, Path) and not source.is_file()]
    if missing:
        raise OSError(f"the library's files are incomplete (run `make setup` for Pyodide): missing "
                      f"{', '.join(missing)}")
    return files


def export_library(dest: Path, web_dir: Path, wheel: Path) -> list[str]:
    """Write the library directory at ``dest`` (made if missing; a file there of the same name is
    replaced); the relative paths written."""
    return write_files(dest, library_files(web_dir, wheel))


def write_files(dest: Path, files: dict[str, Path | bytes]) -> list[str]:
    """Write ``files`` (relative path -> a file to copy, or bytes) under ``dest``; the paths, sorted."""
    for relative, source in files.items():
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, bytes):
            target.write_bytes(source)
        else:
            shutil.copyfile(source, target)
    return sorted(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wgtune.cli.library", description=__doc__.splitlines()[0])
    parser.add_argument("dest", help="the directory to write (served by your site, e.g. public/vendor/wgtune)")
    parser.add_argument("--web-dir", help="wgtune's web/ directory (default: this checkout's)")
    parser.add_argument("--wheel", metavar="FILE", help="the wgtune wheel (default: built from this checkout)")
    args = parser.parse_args(argv)
    root = checkout_root()
    web_dir = Path(args.web_dir) if args.web_dir else root / "web"
    wheel = Path(args.wheel) if args.wheel else build_wheel(root, root / "build" / "web")
    try:
        written = export_library(Path(args.dest), web_dir, wheel)
    except OSError as error:
        print(f"wgtune: {error}", file=sys.stderr)
        return 1
    print(f"wgtune: wrote the library ({len(written)} files) to {args.dest}: import wgtune.js from there")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
