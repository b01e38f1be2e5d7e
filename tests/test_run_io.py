"""Run data is read and written through the run's store (:mod:`engine.storage.store`), never by raw file I/O.

An AST scan of ``engine`` and ``service`` finds every call that touches files directly: ``open()``, the ``os``
and ``shutil`` functions that create, move, list or delete files, and ``Path`` methods that read, write, list or
delete. A module may make such calls only if it is listed below with the reason its files are not a run's data
(or, for the ``dir`` workspace backend and sweeps, why they are local by design). A new module that reaches for
files fails this test; the fix is the store, or a reason here that a reviewer can check. Paths of the run layout
are spelled only in :mod:`engine.storage.run_layout` (``tests/engine/storage/test_run_layout.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: ``os`` functions that create, move, list or delete files.
OS_CALLS = {"replace", "link", "walk", "rename", "remove", "unlink", "makedirs", "mkdir", "rmdir", "scandir", "listdir",
            "symlink", "open", "fsync"}
#: ``Path`` methods that read, write, list or delete (``replace`` is left out: it is mostly ``str.replace``).
PATH_METHODS = {"read_text", "write_text", "read_bytes", "write_bytes", "iterdir", "mkdir", "rglob", "glob", "unlink",
                "rmdir", "rename", "symlink_to", "touch", "hardlink_to"}

#: Receivers that are an :class:`~engine.agent.workspace.AgentWorkspace`, whose methods share ``Path``'s names.
WORKSPACES = {"workspace", "_workspace", "ws", "_ws"}

#: Modules allowed raw file I/O, and why what they touch is no run data kept in a store.
ALLOWED: dict[str, str] = {
    # The store and the formats written to files under it.
    "engine/storage/store/local.py": "the local store itself",
    "engine/storage/store/tree.py": "folders in and out of a store; hard links between two local stores",
    "engine/storage/atomic.py": "atomic writes of local files (scratch folders, settings, service state, the dir backend)",
    "engine/storage/catalog.py": "the fcntl lock of a catalog on a local store (object stores have none)",
    # The agent's view of its state: backends of AgentWorkspace.
    "engine/agent/workspace.py": "DirWorkspace: the dir backend, a folder per agent on local disk by design",
    "engine/agent/journal.py": "the dir backend's step journal (hard links), local by design",
    "engine/agent/workspace_in_memory.py": "materializes an agent's custom skills into a temp folder to run them",
    "engine/agent/packed.py": "export_workspace writes the AS2 folder layout a user asked for",
    "engine/agent/toolsets/skills.py": "skill files shipped with Polis and an agent's local skill folder",
    "engine/agent/skills/discovery.py": "skill folders shipped with Polis or named by env modules",
    "engine/agent/skills/model.py": "SKILL.md files of skill folders",
    "engine/society/fork/workspaces.py": "copies dir-backend workspaces as a kept tick left them (local by design)",
    "engine/society/fork/as_of.py": "as-of copies of dir-backend workspaces in the run's local scratch",
    # Inputs a user names, and what Polis ships.
    "engine/spec.py": "the spec file a user names",
    "engine/population/table.py": "population files a user names (CSV, Parquet, ...)",
    "engine/population/survey_files.py": "a survey's codebook file a user names (YAML)",
    "engine/reference/convert.py": "the reference format's files a user names",
    "engine/env/input_files.py": "input files a spec names, under allowed local folders",
    "engine/env/modules/city.py": "the city file a spec names, or the bundled one",
    # Processes and scratch of their own.
    "engine/env/actor.py": "the env modules' scratch folder and the snapshot folder before it is put into the store",
    "engine/env/routers/template_store.py": "the CodeGen template cache shared across runs (POLIS_HOME)",
    "engine/env/sandbox/child.py": "the sandbox child's own files",
    "engine/population/bounded_read.py": "the reading process's own size (/proc/self/statm) and its null device",
    "engine/env/sandbox/executor.py": "the sandbox's scratch folder",
    "engine/env/sandbox/process.py": "the sandbox process's log",
    "engine/llm/sim/process.py": "the simulated LLM server's log",
    "engine/society/run/preflight/probe.py": "the worker's own engine package (hashed), and a token on local disk",
    "engine/society/run/runner.py": "creates a local run directory (a URL run has none)",
    "engine/cli.py": "creates a local run directory for the reference format's pid.json",
    # Sweeps: SWEEP.json and its cells are local directories for now (a sweep URL is refused).
    "engine/society/run/sweep.py": "a sweep root is a local directory for now",
    "engine/storage/sweep_layout.py": "a sweep root's status log, in a local directory for now",
    "engine/society/tiered/comparison.py": "a sweep's tier_comparison file, in its local root (a sweep root is local for now)",
    # The service's own state beside the runs: registry, keys, grants, uploads.
    "service/registry.py": "the service's registry, and deleting a local run directory it owns",
    "service/submission.py": "removes a local run directory the service made for a refused fork",
    "service/admission/auth.py": "the service's API key files",
    "service/admission/grants.py": "the service's grants file",
    "service/admission/llm_usage.py": "the service's daily LLM-call ledger and the log of counts added since it was written",
    "service/admission/disk_usage.py": "disk use of the service's local run directories",
    "polis/cli.py": "writes a generated key file a user asked for",
    "polis/runs.py": "writes the results page where a user asks, and lists a folder to say why it is not a run",
    "service/client.py": "uploads a file a user names",
    "service/routes/results.py": "removes the temp file of a download once sent",
    "service/report/page.py": "the report page's bundled assets",
}


def raw_io_calls(source: str) -> list[str]:
    """The raw file I/O calls in ``source``, as ``open``, ``os.<f>``, ``shutil.<f>`` or ``.<method>``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append("open")
        elif isinstance(func, ast.Attribute):
            receiver = func.value
            owner = receiver.id if isinstance(receiver, ast.Name) else receiver.attr if isinstance(receiver, ast.Attribute) else None
            if owner == "os" and func.attr in OS_CALLS:
                found.append(f"os.{func.attr}")
            elif owner == "shutil":
                found.append(f"shutil.{func.attr}")
            elif owner not in {"str", "re", *WORKSPACES} and func.attr in PATH_METHODS:
                found.append(f".{func.attr}")
    return found


def _modules() -> list[Path]:
    return [p for d in ("engine", "service", "polis") for p in sorted((ROOT / d).rglob("*.py"))]


@pytest.mark.parametrize(("source", "expected"), [
    ("open(p)", ["open"]),
    ("os.replace(a, b); os.walk(d)", ["os.replace", "os.walk"]),
    ("shutil.rmtree(d)", ["shutil.rmtree"]),
    ("(run / 'SOCIETY.json').read_text()", [".read_text"]),
    ("RunLayout(run).replay.iterdir()", [".iterdir"]),
    ("text.replace('a', 'b'); store.get('k'); re.compile('x')", []),
    ("self.workspace.read_text('AGENT.json'); ws.write_bytes('a', b'')", []),
])
def test_the_scan_finds_raw_file_io(source, expected):
    assert sorted(raw_io_calls(source)) == sorted(expected)


def test_only_the_listed_modules_do_raw_file_io():
    modules = _modules()
    assert len(modules) > 100  # the walk found the packages
    found = {str(p.relative_to(ROOT)): sorted(set(calls)) for p in modules if (calls := raw_io_calls(p.read_text(encoding="utf-8")))}
    unexplained = {module: calls for module, calls in found.items() if module not in ALLOWED}
    assert unexplained == {}, "raw file I/O outside the store: use the run's store, or say here why these files are no run data"


def test_every_listed_module_still_does_raw_file_io():
    stale = [module for module in ALLOWED if not raw_io_calls((ROOT / module).read_text(encoding="utf-8"))]
    assert stale == [], "these modules no longer touch files: take them off the list"
