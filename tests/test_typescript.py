"""The TypeScript declarations of the JavaScript API (web/wgtune.d.ts) under `tsc --noEmit`, strict,
with both TypeScript majors the page's npm packages pin (7.x, the native port, as `typescript`;
5.x as `typescript5`) and with and without @webgpu/types: they type-check an app's use of the API
(web/types-example.ts) and every ```ts snippet of the README and the guides, and refuse wrong uses.

One project per setup holds all of it (the example, the snippets, each wrong use as a file of its
own) and is compiled once: errors are read back per file.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "web"
NODE_MODULES = WEB / "node_modules"
COMPILERS = {"7": NODE_MODULES / "typescript" / "bin" / "tsc", "5": NODE_MODULES / "typescript5" / "bin" / "tsc"}
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# What an app's tsconfig says with each compiler. TypeScript 7's DOM lib declares WebGPU itself;
# 5.x needs @webgpu/types for it; 7 with @webgpu/types listed too needs skipLibCheck, since the
# two libs declare the same names (~180 duplicate identifiers, none of them wgtune's).
SETUPS = {
    "ts7": ("7", [], False),
    "ts7+webgpu-types": ("7", ["@webgpu/types"], True),
    "ts5+webgpu-types": ("5", ["@webgpu/types"], False),
}

# The names the guides' snippets take as given (each snippet is a module of its own: one that
# defines a name of these shadows it).
SNIPPET_CONTEXT = """\
import type { Call, TunableSetHandle, Wgtune, WgtuneGPUBuffer, WgtuneGPUDevice } from "./wgtune.js";
type ScaleParams = { n: number; scale: number };
declare global {
  const wgtune: Wgtune;
  const myGPUDevice: WgtuneGPUDevice;
  const SOURCE: string;
  const xBuffer: WgtuneGPUBuffer, yBuffer: WgtuneGPUBuffer;
  const scale: TunableSetHandle<ScaleParams>, bias: TunableSetHandle;
  const call: Call<ScaleParams>, other: Call;
  const calls: Array<Call<ScaleParams>>;
  const text: string;
}
"""

# Wrong uses of the API, each an edit of the example that tsc must refuse.
WRONG_USES = {
    "a param that is not a number": ("params: { n, scale: 2.0 }", 'params: { n, scale: "two" }'),
    "a grid that is not counts": ("grid: (call) => [Math.ceil(call.params.n / wg)],", 'grid: (call) => "all",'),
    "a field the API does not have": ("wgsl: SOURCE,", "source: SOURCE,"),
    "a param the set's type does not have": ("call.params.n / wg", "call.params.m / wg"),
    "an object for a registered key's label": ('wgtune.check("matmul", "128x128x128")',
                                               'wgtune.check("matmul", { m: 128 })'),
    "a state there is not": ('answer.state !== "Failed"', 'answer.state !== "Unchecked"'),
    "a field of another error class": ("error instanceof NoValidKernelFound) return error.failures",
                                       "error instanceof ConfigError) return error.failures"),
    "a field of another event": ('event.type === "warning") console.warn(event.message)',
                                 'event.type === "pending") console.warn(event.message)'),
}

FENCE = re.compile(r"^```ts\n(.*?)^```", re.MULTILINE | re.DOTALL)
# An import of wgtune, from the npm package or a hosted copy: the declarations in the project.
WGTUNE_IMPORT = re.compile(r"""(\bfrom\s*|\bimport\s*\(\s*)(["'])(?:wgtune|[^"']*/wgtune\.js)\2""")
ERROR = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+),(?P<column>\d+)\): error (?P<text>TS\d+: .*)$", re.MULTILINE)


def snippets() -> dict[str, tuple[Path, int, str]]:
    """Every ```ts snippet of the README and the guides: file name -> (guide, first line, code)."""
    found = {}
    for guide in GUIDES:
        text = guide.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start(1)) + 1
            found[f"{guide.stem}_L{line}.ts"] = (guide, line, match.group(1))
    return found


def tsc(major: str, project: Path) -> str:
    node = shutil.which("node")
    assert node, "node is not installed: run `make setup` (scripts/setup.sh installs it)"
    compiler = COMPILERS[major]
    assert compiler.exists(), f"{compiler} is missing: run `make setup` (npm ci in web/ installs TypeScript {major}.x)"
    done = subprocess.run([node, str(compiler), "--noEmit", "-p", str(project)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 or "error TS" in done.stdout, f"tsc {major} did not run: {done.stdout}{done.stderr}"
    return done.stdout


def project(directory: Path, sources: dict[str, str], types: list[str], skip_lib_check: bool) -> Path:
    """A project of ``sources`` and the declarations, with web/tsconfig.json's options."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(WEB / "wgtune.d.ts", directory / "wgtune.d.ts")
    for name, source in sources.items():
        (directory / name).write_text(source, encoding="utf-8")
    config = json.loads((WEB / "tsconfig.json").read_text(encoding="utf-8"))
    options = config["compilerOptions"]
    assert options["strict"] is True and options["skipLibCheck"] is False, "web/tsconfig.json must stay strict"
    options.update(types=types, skipLibCheck=skip_lib_check, typeRoots=[str(NODE_MODULES)], moduleDetection="force")
    config["files"] = ["wgtune.d.ts", *sources]
    (directory / "tsconfig.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return directory


def errors_by_file(output: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for error in ERROR.finditer(output):
        found.setdefault(Path(error["file"]).name, []).append(f"({error['line']},{error['column']}): {error['text']}")
    return found


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """setup name -> errors by file of its one project (compiled on first use)."""
    example = (WEB / "types-example.ts").read_text(encoding="utf-8")
    sources = {"example.ts": example, "snippet-context.d.ts": SNIPPET_CONTEXT}
    sources.update({name: WGTUNE_IMPORT.sub(r"\1\2./wgtune.js\2", code) for name, (_, _, code) in snippets().items()})
    for index, (wrong, error) in enumerate(WRONG_USES.values()):
        sources[f"wrong_{index}.ts"] = example.replace(wrong, error)
    compiled: dict[str, dict[str, list[str]]] = {}

    def check(setup: str) -> dict[str, list[str]]:
        if setup not in compiled:
            major, types, skip = SETUPS[setup]
            directory = project(tmp_path_factory.mktemp(setup.replace("+", "-")), sources, types, skip)
            compiled[setup] = errors_by_file(tsc(major, directory))
        return compiled[setup]

    return check


def test_the_compilers_are_the_majors_they_are_named_for():
    for major in COMPILERS:
        done = subprocess.run([shutil.which("node") or "node", str(COMPILERS[major]), "--version"],
                              capture_output=True, text=True, timeout=120)
        assert done.stdout.startswith(f"Version {major}."), done.stdout + done.stderr


def test_the_guides_have_typescript_snippets():
    guides = [guide.relative_to(ROOT).as_posix() for guide, _, _ in snippets().values()]
    assert guides.count("README.md") >= 1 and guides.count("docs/browser.md") >= 3, guides


@pytest.mark.parametrize("setup", list(SETUPS))
def test_the_example_and_the_guides_snippets_type_check(checked, setup):
    errors = checked(setup)
    located = snippets()
    problems = []
    for name in ["example.ts", "snippet-context.d.ts", "wgtune.d.ts", *located]:
        for error in errors.get(name, []):
            if name in located:  # where it is in the guide: its line there
                guide, first, _ = located[name]
                line, rest = error[1:].split(",", 1)
                problems.append(f"{guide.relative_to(ROOT)} line {first + int(line) - 1} (column {rest}")
            else:
                problems.append(f"{name}{error}")
    unexpected = set(errors) - {"example.ts", "snippet-context.d.ts", "wgtune.d.ts", *located} - {
        f"wrong_{index}.ts" for index in range(len(WRONG_USES))}
    problems += [f"{name}: {lines}" for name, lines in errors.items() if name in unexpected]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("setup", ["ts7", "ts5+webgpu-types"])
@pytest.mark.parametrize("what", list(WRONG_USES))
def test_the_declarations_refuse_a_wrong_use(checked, setup, what):
    wrong, _ = WRONG_USES[what]
    assert wrong in (WEB / "types-example.ts").read_text(encoding="utf-8"), f"the example no longer has {wrong!r}"
    errors = checked(setup)
    assert "example.ts" not in errors, errors["example.ts"]  # as written it checks: only the edit can fail
    assert errors.get(f"wrong_{list(WRONG_USES).index(what)}.ts"), f"tsc took {what}"


def test_the_declared_values_are_what_wgtune_js_exports():
    """Every class and function the declarations promise is exported by web/wgtune.js (imported in
    node: nothing of a browser is touched at import), each error class naming itself."""
    declared = sorted(re.findall(r"^export declare (?:class|function) (\w+)",
                                 (WEB / "wgtune.d.ts").read_text(encoding="utf-8"), re.MULTILINE))
    script = """
const api = await import(process.argv[1]);
const names = {};
for (const [name, value] of Object.entries(api)) {
  if (typeof value === "function" && value.prototype instanceof Error) names[name] = new value("m").name;
}
console.log(JSON.stringify({ exports: Object.keys(api).sort(), names }));
"""
    node = shutil.which("node")
    assert node, "node is not installed: run `make setup` (scripts/setup.sh installs it)"
    done = subprocess.run([node, "--no-warnings", "--input-type=module", "-e", script, (WEB / "wgtune.js").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert sorted(set(declared) - set(found["exports"])) == [], "declared in wgtune.d.ts, not exported by wgtune.js"
    assert sorted(set(found["exports"]) - set(declared)) == [], "exported by wgtune.js, not declared in wgtune.d.ts"
    assert all(name == made for name, made in found["names"].items()), found["names"]


def test_every_event_the_page_sends_is_declared():
    """Each event type that the page's Python (``_notify`` and ``event_message``) and web/wgtune.js
    send is a member of ``WgtuneEvent``, so that an app's TypeScript can narrow on it (the
    ``cleared`` event was sent one session before it was declared)."""
    union = (WEB / "wgtune.d.ts").read_text(encoding="utf-8")
    union = union[union.index("export type WgtuneEvent"):]
    union = union[:union.index(";\n/**")]
    declared = set(re.findall(r'\{ type: "([a-z-]+)"', union))
    python = "".join(path.read_text(encoding="utf-8") for path in sorted((ROOT / "backends").glob("page*.py")))
    sent = set(re.findall(r'"type": "([a-z-]+)"', python))
    script = (WEB / "wgtune.js").read_text(encoding="utf-8")
    sent |= set(re.findall(r'\b(?:emit|notify)\((?:JSON\.stringify\()?\{ type: "([a-z-]+)"', script))
    assert {"finished", "stored", "cleared", "device-lost"} <= sent, sent  # the patterns still find what is sent
    assert sorted(sent - declared) == [], "sent by the page, not declared in wgtune.d.ts's WgtuneEvent"


def test_the_declarations_compile_without_any_webgpu_types(tmp_path):
    """TypeScript 5.x without @webgpu/types has no GPUDevice: the declarations still compile (a device
    is an `object` there) and the label API is usable."""
    use = ('import { loadWgtune } from "./wgtune.js";\n'
           "const wgtune = await loadWgtune();\n"
           'const answer = await wgtune.execute("matmul", "128x128x128");\n'
           "export const ran: string = answer.ran;\n")
    errors = errors_by_file(tsc("5", project(tmp_path / "bare", {"use.ts": use}, [], False)))
    assert not errors, errors
