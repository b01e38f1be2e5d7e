"""The import graph of the sources has no cycle and no arrow that runs back up a layer.

Read from the code alone (every ``.py`` under ``engine``, ``service`` and ``polis``, parsed, never imported):
each import names a module file of the project, whether it sits at module level, inside a function (a lazy
import is still a dependency) or under ``if TYPE_CHECKING:`` (a type a module names is part of what it knows), and
whether it is absolute or relative. ``from package import name`` names the submodule ``name`` where there is one,
else the package's ``__init__``.

- **Cycles**: the strongly connected components of that graph are single files.
- **Layers**: :data:`LAYERS` orders the project from the ground up; a file may import its own layer or one
  below it, never one above. Inside one layer the only rule is the one on cycles.

The graph can be printed with ``python tests/test_import_graph.py``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "service", "polis")
#: Scripts that skills carry for agents to run: not modules of the project.
SCRIPTS = ("engine/agent/skills/builtin/",)

#: The layers, lowest first: each a group of module prefixes (a package or a module, with what is under it).
#: A module is in the layer of its longest prefix; ``engine`` is the package's ``__init__`` alone, so that every
#: module of the engine is placed on purpose.
LAYERS: tuple[tuple[str, ...], ...] = (
    # values and small helpers that know nothing of the rest
    ("engine", "engine.errors", "engine.run_status", "engine.failpoints", "engine.format_template", "engine.linear_regex",
     "engine.instruction_template", "engine.llm_spec", "engine.router_names", "engine.cluster_options", "engine.engine_loop",
     "engine.plugins", "engine.run_progress"),
    ("engine.storage", "engine.trace", "engine.network.graph", "engine.network.cascades", "engine.network.datasets",
     "engine.network.measures"),
    ("engine.llm",),
    ("engine.env",),
    ("engine.agent",),
    ("engine.network", "engine.population", "engine.tiers", "engine.grid_keys", "engine.grid_files", "engine.spec", "engine.sweep", "engine.spec_schema",
     "engine.spec_calls", "engine.spec_env", "engine.spec_regression"),
    ("engine.society",),
    ("engine.results", "engine.fidelity"),
    ("engine.settings", "engine.cli_output", "engine.api", "engine.reference"),
    ("engine.cli",),
    ("service",),
    ("polis",),
)

# ---- reading the graph ------------------------------------------------------------------------------------

def source_files(root: Path = ROOT) -> list[Path]:
    """The module files of the project, scripts and caches left out."""
    found = []
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            relative = path.relative_to(root).as_posix()
            if "__pycache__" not in path.parts and not relative.startswith(SCRIPTS):
                found.append(path)
    return sorted(found)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """The dotted names ``path`` imports, relative imports resolved; ``from m import n`` gives
    ``m.n`` where ``m.n`` may be a submodule, else ``m`` (:func:`graph` tells them apart)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        module = ".".join([*base, node.module] if node.module else base)
        names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """File -> the files it imports (paths relative to ``root``, itself left out)."""
    files = {module_name(path, root): path.relative_to(root).as_posix() for path in source_files(root)}
    edges: dict[str, set[str]] = {}
    for path in source_files(root):
        source = path.relative_to(root).as_posix()
        targets = set()
        for name in imported_modules(path, root):
            # ``from m import n``: the submodule ``m.n`` where there is one, else ``m`` itself.
            target = files.get(name) or files.get(name.rpartition(".")[0])
            if target is not None and target != source:
                targets.add(target)
        edges[source] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one file (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def placement(path: str) -> tuple[int, str] | None:
    """The index in :data:`LAYERS` of the file ``path`` and the prefix that places it (its longest); None if none."""
    parts = list(Path(path).with_suffix("").parts)
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    best: tuple[int, str] | None = None
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            inside = name == prefix or (name.startswith(prefix + ".") and prefix != "engine")
            if inside and (best is None or len(prefix) > len(best[1])):
                best = (level, prefix)
    return best


def upward_arrows(edges: dict[str, set[str]]) -> list[str]:
    """Each import of a file by one in a lower layer, as ``importer -> imported (prefix < prefix)``."""
    arrows = []
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            low, high = placement(source), placement(target)
            if low is not None and high is not None and low[0] < high[0]:
                arrows.append(f"{source} -> {target}  (layer {low[0]} {low[1]} imports layer {high[0]} {high[1]})")
    return arrows


def _describe(component: frozenset[str], edges: dict[str, set[str]]) -> str:
    ties = [f"    {source} -> {target}" for source in sorted(component) for target in sorted(edges[source] & component)]
    return "\n".join([f"  {len(component)} files: {', '.join(sorted(component))}", *ties])


# ---- the tests ---------------------------------------------------------------------------------------------

def test_the_reader_sees_lazy_relative_and_type_only_imports(tmp_path: Path):
    for package in ("engine/a", "engine/b", "service", "polis"):
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "engine" / "a" / "one.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from engine.b import four\nelse:\n    import engine.b\n"
        "def f():\n    from . import three\n    from engine.b.two import name\n"
    )
    (tmp_path / "engine" / "a" / "three.py").write_text("from engine.a import one\nfrom engine.a import helper\nfrom ..b import two\n")
    (tmp_path / "engine" / "b" / "two.py").write_text("import engine.a.one\n")
    (tmp_path / "engine" / "b" / "four.py").write_text("")
    edges = graph(tmp_path)
    assert edges["engine/a/one.py"] == {"engine/b/__init__.py", "engine/a/three.py", "engine/b/two.py", "engine/b/four.py"}
    assert edges["engine/a/three.py"] == {"engine/a/one.py", "engine/a/__init__.py", "engine/b/two.py"}
    assert sorted(map(sorted, cycles(edges))) == [["engine/a/one.py", "engine/a/three.py", "engine/b/two.py"]]


def test_a_file_is_placed_by_its_longest_prefix_and_an_import_of_a_higher_layer_is_found():
    env, spec = LAYERS.index(("engine.env",)), LAYERS.index(("engine.network", "engine.population", "engine.tiers", "engine.grid_keys",
                                                             "engine.grid_files", "engine.spec", "engine.sweep", "engine.spec_schema",
                                                             "engine.spec_calls", "engine.spec_env", "engine.spec_regression"))
    assert placement("engine/env/routers/react.py") == (env, "engine.env")
    assert placement("engine/__init__.py") == (0, "engine")
    assert placement("engine/unplaced.py") is None  # ``engine`` holds its __init__ alone
    edges = {"engine/env/actor.py": {"engine/spec.py", "engine/errors.py"}, "engine/spec.py": {"engine/env/actor.py"}}
    assert upward_arrows(edges) == [f"engine/env/actor.py -> engine/spec.py  (layer {env} engine.env imports layer {spec} engine.spec)"]


@functools.cache
def project_graph() -> dict[str, set[str]]:
    return graph()


def test_every_module_has_a_layer():
    assert [path for path in project_graph() if placement(path) is None] == []


def test_the_import_graph_has_no_cycle():
    edges = project_graph()
    found = cycles(edges)
    assert not found, "import cycles (break each by moving code to its home):\n" + "\n".join(
        _describe(component, edges) for component in found)


def test_no_arrow_runs_up_a_layer():
    arrows = upward_arrows(project_graph())
    assert not arrows, "imports from a lower layer to a higher one:\n" + "\n".join(arrows)


if __name__ == "__main__":
    for source, targets in sorted(graph().items()):
        for target in sorted(targets):
            print(f"{source} -> {target}")
