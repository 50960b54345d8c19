"""No import cycles: among the Python package's modules, and among the page's JavaScript modules.

A cycle makes the order modules load in matter (a module sees a partly initialized one, and a
name it imports may not exist yet), and it ties the modules together so neither can be read,
tested or changed alone. These tests read the sources (nothing is imported or run) and fail with
the cycles they find.

How the Python graph is built
-----------------------------

Nodes are the package's modules, named as they are imported: the folders are mapped onto the one
import root by ``[tool.setuptools.package-dir]`` in pyproject.toml (``core/`` is ``wgtune``,
``backends/`` is ``wgtune.backends``, ...), and a folder's ``__init__.py`` is the node of the
package itself (``core/__init__.py`` is ``wgtune``).

Edges come from every ``import`` statement in a module, wherever it stands: at the top, inside a
function, under an ``if``. An import deferred into a function still makes its module depend on
the other one; it only hides the cycle until that function runs. Absolute imports of ``wgtune...``
and relative imports count; others (the standard library, third-party packages) are not nodes.

- ``import a.b.c`` is an edge to ``a.b.c``.
- ``from a.b import c`` is an edge to the module ``a.b.c`` when there is one (``from . import
  indexeddb``), else to ``a.b`` itself, whose name ``c`` is (``from wgtune import Args``,
  ``from . import helper`` where the package's ``__init__`` defines ``helper``).
- Python initializes every package on the way to a module before the module. So an import of
  ``wgtune.kernels.demo`` from ``wgtune.backends.page`` is also an edge to ``wgtune.kernels``,
  whose ``__init__`` runs first. A package that contains the importing module is left out of
  these implied edges: it was initialized before the importing module started, so reaching it
  again adds no dependency (without this rule every submodule would seem to depend on its own
  package's ``__init__``, and every package would be one big cycle).

How package ``__init__`` modules are treated: an ``__init__`` is a node like any other. Its edges
to its own submodules (re-exports such as ``from .tunable import Args``) are kept, and so is an
edge from a submodule to its own package when the submodule names the package as what it imports
from (``from wgtune import Args``, ``from . import x`` where ``x`` is not a submodule). A package
importing its submodules is fine, and a submodule importing a sibling directly is fine; the pair
is a cycle only when a submodule also takes names from its own package's ``__init__``, which
imports that submodule back: ``wgtune.store.format`` doing ``from wgtune import __version__`` is the
cycle ``wgtune.store.format -> wgtune -> wgtune.store.format``, because ``wgtune/__init__`` imports
``wgtune.store.format`` (and at that moment ``__version__`` may not be set yet). Such a submodule should
import from the sibling that defines the name (``from .version import __version__``). Reducing
``from wgtune import X`` to the submodule that defines ``X`` instead would hide exactly this
cycle, so the rule does not. The same goes for a package that imports its submodules only inside
a function (a command line dispatching to one module per command): if those submodules take
helpers from the package's ``__init__``, the two depend on each other, and the helpers belong in
a module of their own that both import. A module of another package taking names from
``wgtune`` (``from wgtune import Args`` in ``wgtune.kernels.demo``) is an edge to ``wgtune`` as
well, and no cycle as long as nothing ``wgtune/__init__`` imports leads back to it.

The JavaScript graph
--------------------

Nodes are ``web/*.js``; edges are static ``import ... from "..."`` and ``export ... from "..."``
statements. Paths are the page's URLs: ``"/keys.js"`` is ``web/keys.js`` (``wgtune serve`` serves
``web/`` at the root) and ``"./keys.js"`` is the same file. ``/pyodide/...`` (the npm package) is
not the page's own code and is left out. Dynamic ``import()`` is not a static edge and is left
out too.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "web"

# Module -> {module it imports: where (the file and line of the first import statement that does)}.
Graph = dict[str, dict[str, str]]


# -- cycles -----------------------------------------------------------------------------------------


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted; nodes only named as targets count too."""
    nodes = sorted(set(graph) | {target for targets in graph.values() for target in targets})
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        # Recursive: the graphs here have a few dozen nodes, far from the recursion limit.
        index[node] = lowest[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                lowest[node] = min(lowest[node], lowest[target])
            elif target in on_stack:
                lowest[node] = min(lowest[node], index[target])
        if lowest[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in nodes:
        if node not in index:
            visit(node)
    return components


def shortest_cycle_through(graph: Mapping[str, Iterable[str]], start: str, within: set[str]) -> list[str]:
    """A shortest path start -> ... -> start inside `within` (breadth first): one readable cycle."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph.get(node, ())):
                if target not in within:
                    continue
                if target == start:  # back where it began: walk the path back from `node`
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is on no cycle within {sorted(within)}")


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle for each group of modules that reach one another (and each module importing itself)."""
    cycles = []
    for component in strongly_connected(graph):
        members = set(component)
        if len(component) > 1 or component[0] in graph.get(component[0], ()):
            cycles.append(shortest_cycle_through(graph, component[0], members))
    return cycles


def describe(cycles: list[list[str]], graph: Graph) -> str:
    """Each cycle, then every import among the modules that reach one another, with its place."""
    components = strongly_connected(graph)
    lines = []
    for cycle in cycles:
        lines.append(" -> ".join(cycle))
        group = set(next(component for component in components if cycle[0] in component))
        lines.append(f"  the imports among {', '.join(sorted(group))}:")
        lines.extend(
            f"    {module} -> {target}  ({where})"
            for module in sorted(group)
            for target, where in sorted(graph[module].items())
            if target in group
        )
    return "\n".join(lines)


# -- the Python graph -------------------------------------------------------------------------------


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Package name -> its folder, as pyproject.toml maps them."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    mapping = pyproject["tool"]["setuptools"]["package-dir"]
    return {package: root / folder for package, folder in mapping.items()}


def modules_of(packages: Mapping[str, Path]) -> dict[str, Path]:
    """Module name -> its source file: each package's ``__init__.py`` and its other ``.py`` files,
    and those of its sub-packages (a folder with an ``__init__.py``: the core's wings)."""
    modules = {}
    for package, folder in packages.items():
        for source in sorted(folder.rglob("*.py")):
            parts = source.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            elif not (source.parent / "__init__.py").exists():
                continue  # a stray file in a folder that is not a package
            if any(not (folder.joinpath(*parts[:i]) / "__init__.py").exists() for i in range(1, len(parts))):
                continue
            modules[".".join((package, *parts))] = source
    return modules


def _containing_packages(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imports_of(module: str, source: Path, modules: Mapping[str, Path], root: Path) -> dict[str, str]:
    """The modules of `modules` that `module` imports (see the module docstring for the rules)."""
    is_package = source.stem == "__init__"
    # What a relative import is relative to: the package itself for an __init__, else its package.
    here = module if is_package else module.rpartition(".")[0]
    named: list[tuple[str, int]] = []  # (module named, line), in the file's order
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            named.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                named.append((submodule if submodule in modules else base, node.lineno))
    place = source.relative_to(root).as_posix()
    edges: dict[str, str] = {}
    own_packages = set(_containing_packages(module)) | ({module} if is_package else set())
    for target, line in sorted(named, key=lambda item: item[1]):
        # Names outside the package (the standard library, wgpu, ...) are not nodes. So is a
        # module that does not exist (a stale import), which fails on its own when imported.
        if target not in modules:
            continue
        implied = [p for p in _containing_packages(target) if p in modules and p not in own_packages]
        for reached in (target, *implied):
            edges.setdefault(reached, f"{place}:{line}")
    return edges


def python_graph(packages: Mapping[str, Path], root: Path = ROOT) -> Graph:
    modules = modules_of(packages)
    return {module: imports_of(module, source, modules, root) for module, source in modules.items()}


# -- the JavaScript graph ---------------------------------------------------------------------------

# `import x from "..."`, `import { a, b } from "..."` (also over several lines), `import "..."`,
# `export { a } from "..."`, `export * from "..."`; not `import("...")`, which is dynamic.
STATIC_IMPORT = re.compile(
    r"""^[ \t]*(?:import|export)\s+(?:[\w$*{}\s,]+?\s+from\s+)?["']([^"']+)["']""",
    re.MULTILINE,
)


def js_imports(text: str) -> list[tuple[str, int]]:
    """Each static import's path, with the line its statement starts on."""
    return [(match[1], text.count("\n", 0, match.start()) + 1) for match in STATIC_IMPORT.finditer(text)]


def js_graph(web: Path = WEB) -> Graph:
    files = {source.name for source in web.glob("*.js")}
    graph: Graph = {}
    for name in sorted(files):
        targets: dict[str, str] = {}
        for path, line in js_imports((web / name).read_text()):
            if path.startswith("/pyodide/"):
                continue
            target = path.removeprefix("/").removeprefix("./")
            # A path that names no file of web/ would break the page at load; and unchecked, it would
            # quietly drop an edge from the graph.
            assert target in files, f"web/{name} imports {path!r}, which is not a file of web/"
            targets.setdefault(target, f"{web.name}/{name}:{line}")
        graph[name] = targets
    return graph


# -- the checks -------------------------------------------------------------------------------------


def test_the_python_package_has_no_import_cycle():
    packages = package_dirs()
    graph = python_graph(packages)
    for package in packages:  # the graph really holds the package: every folder of the mapping
        assert package in graph, package
    assert graph["wgtune"], "core/__init__.py re-exports from its submodules: it has edges"
    cycles = find_cycles(graph)
    assert not cycles, "import cycles among the package's modules:\n" + describe(cycles, graph)


def test_the_page_scripts_have_no_import_cycle():
    graph = js_graph()
    assert graph.get("app.js"), "the page's entry imports its modules"
    cycles = find_cycles(graph)
    assert not cycles, "import cycles among web/*.js:\n" + describe(cycles, graph)


# -- the checks can fail ----------------------------------------------------------------------------


def test_find_cycles_finds_a_cycle_and_names_its_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) == []


def _write_package(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {"pkg": root / "core", "pkg.sub": root / "sub"}


def test_a_submodule_taking_names_from_its_own_package_is_a_cycle(tmp_path):
    # The store's old cycle: the package's __init__ imports the submodule, which imports from the package.
    packages = _write_package(tmp_path, {
        "core/__init__.py": "from .store import Store\nfrom .version import VERSION\n",
        "core/store.py": "from pkg import VERSION\nclass Store: ...\n",
        "core/version.py": "VERSION = '1'\n",
        "sub/__init__.py": "",
    })
    graph = python_graph(packages, tmp_path)
    assert find_cycles(graph) == [["pkg", "pkg.store", "pkg"]]
    # Importing from the sibling that defines the name instead: no cycle.
    (tmp_path / "core/store.py").write_text("from .version import VERSION\nclass Store: ...\n")
    assert find_cycles(python_graph(packages, tmp_path)) == []


def test_an_import_inside_a_function_and_relative_forms_count(tmp_path):
    packages = _write_package(tmp_path, {
        "core/__init__.py": "from .tunable import Args\n",
        "core/tunable.py": "class Args: ...\n",
        "sub/__init__.py": "from .demo import demo\n",
        "sub/demo.py": "from pkg import Args\nfrom . import reduction\ndef demo(): ...\n",
        "sub/reduction.py": "def reduce():\n    from .demo import demo\n    return demo\n",
    })
    graph = python_graph(packages, tmp_path)
    assert set(graph["pkg.sub.demo"]) == {"pkg", "pkg.sub.reduction"}  # `from . import reduction`: the submodule
    assert graph["pkg.sub.reduction"] == {"pkg.sub.demo": "sub/reduction.py:2"}  # though inside a function
    assert find_cycles(graph) == [["pkg.sub.demo", "pkg.sub.reduction", "pkg.sub.demo"]]


def test_a_module_of_another_package_implies_that_package_s_init(tmp_path):
    # core -> sub.demo runs sub/__init__ first, which imports core back: a cycle through the __init__.
    packages = _write_package(tmp_path, {
        "core/__init__.py": "def helper():\n    import pkg.sub.demo\n",
        "sub/__init__.py": "from pkg import helper\n",
        "sub/demo.py": "",
    })
    graph = python_graph(packages, tmp_path)
    assert set(graph["pkg"]) == {"pkg.sub", "pkg.sub.demo"}
    assert find_cycles(graph) == [["pkg", "pkg.sub", "pkg"]]


def test_js_imports_reads_every_static_form_and_no_dynamic_one():
    text = (
        'import { a, b } from "/keys.js";\n'
        "import {\n  c,\n  d,\n} from './chart.js';\n"
        'import "/style-loader.js";\n'
        'export { e } from "/format.js";\n'
        'export * from "/dom.js";\n'
        'const later = import("/lazy.js");\n'
        '// import nothing from "here"\n'
    )
    assert js_imports(text) == [
        ("/keys.js", 1), ("./chart.js", 2), ("/style-loader.js", 6), ("/format.js", 7), ("/dom.js", 8),
    ]


def test_js_graph_finds_a_cycle_between_two_scripts(tmp_path):
    (tmp_path / "a.js").write_text('import { b } from "/b.js";\nimport { load } from "/pyodide/pyodide.mjs";\n')
    (tmp_path / "b.js").write_text('import { a } from "./a.js";\n')
    graph = js_graph(tmp_path)
    assert graph == {"a.js": {"b.js": f"{tmp_path.name}/a.js:1"}, "b.js": {"a.js": f"{tmp_path.name}/b.js:1"}}
    assert find_cycles(graph) == [["a.js", "b.js", "a.js"]]


# -- the core's wings ------------------------------------------------------------------------------

# The core's layers, lowest first. A module may import from its own layer and those below, never
# from one above: the WGSL wing knows nothing of tuning, the store nothing of how a tune runs, and
# only the public API at the top sees everything. A wing is named by its package (every module in
# it belongs); the base vocabulary and the API are modules of the root, named one by one. Every
# module of the core must be in exactly one layer, so a new module is placed on purpose.
CORE_LAYERS: list[tuple[str, set[str]]] = [
    ("base", {"wgtune.errors", "wgtune.text", "wgtune.version", "wgtune.key", "wgtune.state", "wgtune.config",
              "wgtune.runner"}),
    ("wgsl", {"wgtune.wgsl"}),
    ("search", {"wgtune.search"}),
    ("sets", {"wgtune.sets"}),
    ("gpu", {"wgtune.gpu"}),
    ("store", {"wgtune.store"}),
    ("tune", {"wgtune.tune"}),
    ("api", {"wgtune", "wgtune.tuner", "wgtune.settling", "wgtune.cache", "wgtune.batch", "wgtune.coordinator"}),
]


def layer_of(module: str, layers: list[tuple[str, set[str]]] = CORE_LAYERS) -> int | None:
    """The index of the layer `module` is in: named itself, or inside a named wing package (the root
    package, a name without a dot, names only its own __init__)."""
    found = [
        index for index, (_, members) in enumerate(layers)
        if module in members or any("." in member and module.startswith(f"{member}.") for member in members)
    ]
    assert len(found) <= 1, f"{module} is in more than one layer: {[layers[i][0] for i in found]}"
    return found[0] if found else None


def upward_imports(graph: Graph, layers: list[tuple[str, set[str]]] = CORE_LAYERS) -> list[str]:
    """Each import of a module from a layer above its own, with its place."""
    found = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module, layers)
        if mine is None:
            continue
        for target, where in sorted(targets.items()):
            theirs = layer_of(target, layers)
            if theirs is not None and theirs > mine:
                found.append(f"{module} ({layers[mine][0]}) -> {target} ({layers[theirs][0]})  ({where})")
    return found


def core_modules(graph: Graph) -> list[str]:
    outside = ("wgtune.backends", "wgtune.kernels", "wgtune.cli")
    return [module for module in graph if not module.startswith(outside)]


def test_every_core_module_is_in_one_layer():
    graph = python_graph(package_dirs())
    modules = core_modules(graph)
    assert len(modules) > 40 and {"wgtune.tune.tuning", "wgtune.wgsl.declarations", "wgtune.tuner"} <= set(modules)
    unplaced = [module for module in modules if layer_of(module) is None]
    assert not unplaced, f"core modules in no layer of CORE_LAYERS (place them): {unplaced}"


def test_the_core_s_wings_import_nothing_from_above():
    violations = upward_imports(python_graph(package_dirs()))
    assert not violations, "imports from a higher layer of the core:\n" + "\n".join(violations)


def test_upward_imports_are_found(tmp_path):
    packages = _write_package(tmp_path, {
        "core/__init__.py": "",
        "core/errors.py": "",
        "core/low/__init__.py": "",
        "core/low/reader.py": "from ..errors import E\nfrom ..high.runner import run\n",
        "core/high/__init__.py": "",
        "core/high/runner.py": "from ..low.reader import read\n",
        "sub/__init__.py": "",
    })
    layers = [("base", {"pkg.errors"}), ("low", {"pkg.low"}), ("high", {"pkg.high"}), ("api", {"pkg"})]
    graph = python_graph(packages, tmp_path)
    assert "pkg.low.reader" in graph and "pkg.high.runner" in graph  # the sub-packages are walked
    assert upward_imports(graph, layers) == [  # the module, and its package, whose __init__ runs first
        "pkg.low.reader (low) -> pkg.high (high)  (core/low/reader.py:2)",
        "pkg.low.reader (low) -> pkg.high.runner (high)  (core/low/reader.py:2)",
    ]
