"""The README and the guides in docs/: their examples run verbatim and do what they say, every
Python block of them is run by a test here, and every link and file path they give leads
somewhere.

Each runnable example is found by a marker, a string only that block contains, so that a block
may move from one page to another, or along a page, and still be the one its test runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# A fenced block: its language tag and its text, the fence possibly indented (inside a list item).
FENCE = re.compile(r"^[ \t]*```([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)
PYTHON = {"python", "py", "python3", "pycon"}

# Which test runs which Python block: the marker it finds the block by.
FIRST_KERNEL = 'TunableSet("scale", candidates'
OVERRIDES = "override WORKGROUP_SIZE"
SPACE = "axpy = wgtune.TunableSet"
PER_KEY_SEARCH = "search=wgtune.Search("
BINDINGS = "two_pass_sum"
BATCH = "tuner.batch()"
STRATEGY = 'register_strategy("nearest")'
MARKERS = (FIRST_KERNEL, OVERRIDES, SPACE, PER_KEY_SEARCH, BINDINGS, BATCH, STRATEGY)


def pages() -> list[Path]:
    """The README and every guide."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def fenced_blocks() -> list[tuple[Path, str, str]]:
    """Every fenced block of every page: (page, language tag, text)."""
    return [(page, tag.lower(), text) for page in pages() for tag, text in FENCE.findall(page.read_text())]


def python_blocks() -> list[tuple[Path, str]]:
    return [(page, text) for page, tag, text in fenced_blocks() if tag in PYTHON]


def block(marker: str) -> tuple[Path, str]:
    """The one Python block of the pages that contains ``marker``, and its page."""
    found = [(page, text) for page, text in python_blocks() if marker in text]
    assert len(found) == 1, f"{len(found)} Python blocks contain {marker!r}: {[str(p) for p, _ in found]}"
    return found[0]


def run_script(tmp_path, source: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = tmp_path / "example.py"
    script.write_text(source)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)


def run_block(tmp_path, marker: str) -> str:
    """The Python block that contains ``marker``, run as a script; its output."""
    _, example = block(marker)
    done = run_script(tmp_path, example, {**os.environ, "WGTUNE_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- the examples ------------------------------------------------------------------------------


def test_readme_example_runs_verbatim_and_tunes_then_hits(tmp_path):
    page, example = block(FIRST_KERNEL)
    assert page == README, "the first kernel is the README's"
    assert python_blocks()[0][1] == example, "the first kernel is the README's first Python block"
    env = {**os.environ, "WGTUNE_CACHE_DIR": str(tmp_path / "cache"), "WGTUNE_RECORDS": str(tmp_path / "r.jsonl")}
    first = run_script(tmp_path, example, env)
    assert first.returncode == 0, first.stderr
    assert re.search(r"ran scale_wg\d+ \(0\.0, 3\.0, 6\.0\)", first.stdout), first.stdout
    second = run_script(tmp_path, example, env)
    assert second.returncode == 0, second.stderr
    records = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(records) == 1, "the second run is a cache hit: no new tune, no new record"


def test_the_override_constants_example_runs_verbatim_and_computes_with_its_values(tmp_path):
    out = run_block(tmp_path, OVERRIDES)
    ran = r"ran scale_wg(64|128|256) \{'WORKGROUP_SIZE': \d+, 'scale': 3\.0\} \(0\.0, 3\.0, 6\.0\)"
    assert re.search(ran, out), out


def test_the_parameter_space_example_runs_verbatim_and_tunes_its_candidates(tmp_path):
    out = run_block(tmp_path, SPACE)
    assert re.search(r"^8 candidates; ran axpy\[WG=\d+,PER_THREAD=\d\] \(1\.0, 3\.0, 5\.0\)$", out, re.M), out


def test_the_per_key_search_example_runs_verbatim_and_measures_its_budget(tmp_path):
    out = run_block(tmp_path, PER_KEY_SEARCH)
    assert re.search(r"^ran scale\[WG=\d+,PER_THREAD=\d\]: 10 of 30 measured; \(0\.0, 3\.0, 6\.0\)$", out, re.M), out


def test_the_bindings_example_runs_verbatim_and_every_two_pass_candidate_meets_the_reference(tmp_path):
    out = run_block(tmp_path, BINDINGS)
    assert re.search(r"^ran sum_wg\d+ 500000\.0 \['Measured', 'Measured', 'Measured'\]$", out, re.M), out


def test_the_batch_example_runs_verbatim_and_keeps_the_order_of_its_launches(tmp_path):
    out = run_block(tmp_path, BATCH)
    assert out.strip() == "(51.0, 51.0, 51.0)", out  # 1.0, then x -> (2x + 1) / 2 a hundred times


def test_the_strategy_example_registers_its_strategy_replays_it_and_its_bad_option_is_refused(tmp_path):
    out = run_block(tmp_path, STRATEGY)
    assert out.splitlines() == [
        "20 measured; the fastest of them: 61",
        "search strategy 'nearest': option stride=0: a count of at least 1",
    ], out


# -- every block is run, every link leads somewhere ----------------------------------------------


def test_every_python_block_of_the_pages_is_run_by_a_test():
    blocks = python_blocks()
    unrun = [f"{page.relative_to(ROOT)}: {text[:80]!r}" for page, text in blocks
             if sum(marker in text for marker in MARKERS) != 1]
    assert not unrun, "a Python block no test here runs (give it a marker and a test):\n" + "\n".join(unrun)
    assert len(blocks) == len(MARKERS), "each marker finds one block"
    for marker in MARKERS:
        block(marker)


def test_the_fences_are_found_in_lists_and_tagged():
    text = "a\n```python\nx = 1\n```\n- item:\n\n  ```py\n  y = 2\n  ```\n```\nplain\n```\n"
    assert FENCE.findall(text) == [("python", "x = 1\n"), ("py", "  y = 2\n"), ("", "plain\n")]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        name, count = slug(heading), 1
        while name in found:
            name, count = f"{slug(heading)}-{count}", count + 1
        found.add(name)
    return found


def prose(page: Path) -> str:
    """A page less its fenced blocks and code spans: what links are read from."""
    return re.sub(r"`[^`]*`", "", FENCE.sub("", page.read_text()))


def test_slugs_are_github_s():
    assert slug("Bundles: winners for GPUs you do not own") == "bundles-winners-for-gpus-you-do-not-own"
    assert slug("Your own kernels, from JavaScript") == "your-own-kernels-from-javascript"
    assert slug("Many small launches: batches") == "many-small-launches-batches"


def test_every_link_between_the_pages_leads_to_a_page_and_heading_that_exist():
    broken = []
    for page in pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(page)):
            if re.match(r"[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


# The checkout's top folders: a path in a code span that starts with one of them names a file.
TOP = ("core", "backends", "kernels", "cli", "web", "npm", "tests", "e2e", "bench", "scripts", "docs")


def test_every_file_path_the_pages_name_exists():
    """A file moved (the core's wings, a kernel family's package) leaves no page pointing at its old place."""
    missing = []
    for page in pages():
        text = page.read_text()
        for path in sorted(set(re.findall(rf"(?<![\w/.-])((?:{'|'.join(TOP)})/[\w./-]*\w)", text))):
            if not (ROOT / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, "paths that name no file:\n" + "\n".join(missing)


def test_the_command_lines_synopsis_names_every_option_of_every_command_and_no_other():
    """docs/configuration.md's synopsis of `wgtune`: an option added to a command (collect's
    --min-reporters and --sets, farm's --scheduler-file were missing once) is listed there, and
    none it lists is gone."""
    import argparse

    from wgtune.cli import build_parser

    def options(parser: argparse.ArgumentParser) -> set[str]:
        found: set[str] = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found |= options(sub)
            else:
                found |= {option for option in action.option_strings if option.startswith("--")}
        return found - {"--help"}

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    text = (ROOT / "docs" / "configuration.md").read_text()
    synopsis = next(block for tag, block in FENCE.findall(text) if tag == "sh" and block.startswith("wgtune tune "))
    listed: dict[str, set[str]] = {}
    command = None
    for line in synopsis.splitlines():
        if line.startswith("wgtune "):
            command = line.split()[1]
            listed[command] = set()
        listed[command] |= set(re.findall(r"--[\w-]+", line))
    assert sorted(listed) == sorted(commands), synopsis
    wrong = {name: {"missing": sorted(options(parser) - listed[name]), "gone": sorted(listed[name] - options(parser))}
             for name, parser in commands.items() if options(parser) != listed[name]}
    assert not wrong, wrong


def test_the_hosting_guides_listing_of_the_copied_folder_is_what_the_command_writes():
    """docs/hosting.md lists the library's files by name: a module added to what wgtune.js imports
    (errors.js, collector.js were missing once) must be listed there too, and none that is gone."""
    from wgtune.cli.library import LIBRARY_TYPES, PYODIDE_FILES, library_modules

    text = (ROOT / "docs" / "hosting.md").read_text()
    listing = next(block for _tag, block in FENCE.findall(text) if block.startswith("vendor/wgtune/"))
    modules, _, rest = listing.partition("\n  package.json")  # its "exports" names wgtune.js again
    pyodide = rest.partition("\n  pyodide/")[2]
    listed = re.findall(r"[\w.-]+\.(?:d\.ts|m?js)\b", modules)
    assert sorted(listed) == sorted([*library_modules(ROOT / "web"), LIBRARY_TYPES]), listing
    assert sorted(re.findall(r"[\w.-]+\.(?:mjs|wasm|zip|json)\b", pyodide)) == sorted(PYODIDE_FILES), listing
