"""Arrows point one way: read from the import graph of the sources, not from a convention.

- nothing in ``engine`` imports ``service`` (the control plane sits on the engine, never under it);
- nothing in ``engine`` or ``service`` imports ``polis`` (the front door sits on both);
- ``service`` reaches the engine through one doorway, :mod:`engine.api`, plus the engine's value modules its
  HTTP client shares (errors, statuses, progress, the spec, the result models: no Dask, no DuckDB), and nothing
  else of the engine (``tests/service/test_client_events.py`` checks that the client, on them, loads no Dask);
- nothing in ``engine.llm``, ``engine.storage`` or ``engine.trace`` imports agent, env or society
  code (the lower layers know no simulation);
- nothing in ``engine.agent`` or ``engine.env`` imports the society or the CLI;
- ``engine.spec`` imports nothing from ``engine.society``;
- a sans-IO core (the tick transaction's, the env control's messages) reaches no asyncio, Dask or file API when it
  runs, through any project module it imports.

Every import counts: at module level, inside functions, and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIMULATION = ("engine.agent", "engine.env", "engine.society")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path, root: Path = ROOT, *, runtime: bool = False) -> set[str]:
    """Every module ``path`` imports, relative imports resolved (``runtime``: not those under ``TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    names: set[str] = set()
    typing_only = {id(inner) for node in ast.walk(tree) if runtime and isinstance(node, ast.If)
                   and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING") for inner in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def sources(packages: tuple[str, ...], root: Path = ROOT) -> list[Path]:
    """The source files of ``packages`` (each a package folder or a single module)."""
    found = []
    for package in packages:
        path = root / package.replace(".", "/")
        module = path.with_suffix(".py")
        assert path.is_dir() or module.is_file(), f"no package or module {package}"
        found.extend(path.rglob("*.py") if path.is_dir() else [module])
    return sorted(found)


def violations(packages: tuple[str, ...], forbidden: tuple[str, ...], root: Path = ROOT) -> list[str]:
    found = []
    for path in sources(packages, root):
        for name in sorted(imported(path, root)):
            if any(name == prefix or name.startswith(prefix + ".") for prefix in forbidden):
                found.append(f"{path.relative_to(root)} imports {name}")
    return found


def test_the_graph_reader_sees_imports_of_every_kind(tmp_path: Path):
    (tmp_path / "engine" / "llm").mkdir(parents=True)
    probe = tmp_path / "engine" / "llm" / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from engine.society import runner\n"
        "def f():\n    import engine.agent.base\n    from ..env import tool\n    from . import limiter\n"
    )
    assert {"engine.society.runner", "engine.agent.base", "engine.env.tool", "engine.llm.limiter"} <= imported(probe, tmp_path)
    assert violations(("engine.llm",), SIMULATION, tmp_path) == [
        "engine/llm/probe.py imports engine.agent.base",
        "engine/llm/probe.py imports engine.env",
        "engine/llm/probe.py imports engine.env.tool",
        "engine/llm/probe.py imports engine.society",
        "engine/llm/probe.py imports engine.society.runner",
    ]


def test_engine_never_imports_the_service():
    assert violations(("engine",), ("service",)) == []


#: What ``service`` may import of the engine: the doorway and the value modules its client shares.
VALUE_MODULES = ("engine.errors", "engine.run_status", "engine.run_progress", "engine.spec", "engine.spec_regression",
                 "engine.results")
SERVICE_DOORWAY = ("engine.api", *VALUE_MODULES)


def engine_modules_outside(packages: tuple[str, ...], allowed: tuple[str, ...], root: Path = ROOT) -> list[str]:
    """Each import of an ``engine`` module by ``packages`` that is not one of ``allowed`` (or a name in one)."""
    found = []
    for path in sources(packages, root):
        modules = {name for name in imported(path, root) if name == "engine" or name.startswith("engine.")}
        # ``from engine.api import X`` also records ``engine.api.X``: a name inside an allowed module, unless
        # it is a module of its own (``engine.results.agents``).
        outside = sorted(name for name in modules if name not in allowed
                         and (_is_module(name, root) or not any(name.startswith(a + ".") for a in allowed)))
        found.extend(f"{path.relative_to(root)} imports {name}" for name in outside)
    return found


def _is_module(name: str, root: Path) -> bool:
    path = root / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_the_doorway_rule_sees_a_deep_import(tmp_path: Path):
    (tmp_path / "service").mkdir()
    (tmp_path / "engine" / "results").mkdir(parents=True)
    (tmp_path / "engine" / "results" / "__init__.py").write_text("")
    (tmp_path / "engine" / "results" / "agents.py").write_text("")
    (tmp_path / "service" / "probe.py").write_text("from engine.api import run_spec\nfrom engine.society.run import sweep\n"
                                                   "from engine.results import AgentMemory, agents\n")
    assert engine_modules_outside(("service",), SERVICE_DOORWAY, tmp_path) == [
        "service/probe.py imports engine.results.agents",
        "service/probe.py imports engine.society.run",
        "service/probe.py imports engine.society.run.sweep",
    ]


def test_the_service_reaches_the_engine_through_one_doorway():
    assert engine_modules_outside(("service",), SERVICE_DOORWAY) == []


def test_nothing_below_the_front_door_imports_it():
    assert violations(("engine", "service"), ("polis",)) == []


@pytest.mark.parametrize("layer", ["engine.llm", "engine.storage", "engine.trace"])
def test_lower_layers_import_no_simulation_code(layer: str):
    assert violations((layer,), SIMULATION) == []


def test_the_spec_does_not_import_the_society():
    assert violations(("engine.spec",), ("engine.society",)) == []


@pytest.mark.parametrize("layer", ["engine.agent", "engine.env"])
def test_agents_and_env_do_not_import_the_society(layer: str):
    assert violations((layer,), ("engine.society", "engine.cli")) == []


def test_no_module_is_over_600_lines():
    # STYLE.md: split by concept, never to meet a line count; past ~600 lines a module is usually two concepts.
    long = {str(path.relative_to(ROOT)): n for path in sources(("engine", "service", "polis")) if (n := len(path.read_text().splitlines())) > 600}
    assert long == {}


def test_the_society_keeps_only_the_tick_transaction_at_its_top_level():
    top = sorted(path.name for path in (ROOT / "engine" / "society").glob("*.py"))
    assert len(top) <= 12, top


#: What a sans-IO core must not reach, directly or through the project modules it imports.
IO = ("asyncio", "distributed", "dask", "fsspec", "duckdb", "pyarrow", "os", "pathlib", "shutil", "tempfile", "io",
      "socket", "subprocess", "threading", "httpx", "litellm")


def reached(module: str, root: Path = ROOT) -> dict[str, set[str]]:
    """The project modules ``module`` imports when it runs (not for type checking), directly or through others
    (a package's ``__init__`` only when imported by name), each with the outside modules it imports itself."""
    found: dict[str, set[str]] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = root / (name.replace(".", "/") + ".py")
        if not path.is_file():
            path = root / name.replace(".", "/") / "__init__.py"
        names = imported(path, root, runtime=True)
        found[name] = {n for n in names if n.split(".")[0] not in ("engine", "service", "polis")}
        for other in names:
            if other.split(".")[0] == "engine" and (root / (other.replace(".", "/") + ".py")).is_file():
                todo.append(other)
    return found


def test_the_io_check_sees_io_where_there_is_some():
    assert "asyncio" in reached("engine.society.society")["engine.society.society"]
    assert "engine.society.batch" in reached("engine.society.society")
    assert "distributed" in reached("engine.society.shells.on_dask")["engine.society.shells.on_dask"]


@pytest.mark.parametrize("core", ["engine.society.tick_core", "engine.env.control"])
def test_a_sans_io_core_reaches_no_io(core: str):
    leaks = {name: sorted(n for n in outside if n.split(".")[0] in IO) for name, outside in reached(core).items()}
    assert {name: io for name, io in leaks.items() if io} == {}
