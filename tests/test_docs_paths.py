"""Every file path the README and docs/ name exists: links, and repository paths in backticks.

A path counts when it starts with a top-level folder of the repository (``engine/``, ``docs/`` ...) or is a
Markdown link to a local file; a link resolves from the page's own folder. Placeholders (``<id>``, ``*``,
``{name}``, ``...``) and URLs are not paths.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("engine/", "service/", "polis/", "docs/", "examples/", "deploy/", "tests/", "benchmarks/", ".ci/")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\s]+)`")
_PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.|\|")
#: Paths the docs tell the reader to make (and .gitignore keeps out of the repository).
MADE_BY_THE_READER = {"deploy/tls/"}


def named_paths(page: Path) -> list[tuple[str, Path]]:
    """(as written, where it resolves) for each path ``page`` names."""
    text = page.read_text(encoding="utf-8")
    found: list[tuple[str, Path]] = []
    for target in _LINK.findall(text):
        path = target.split("#", 1)[0]
        if not path or "://" in path or path.startswith("mailto:") or _PLACEHOLDER.search(path):
            continue
        found.append((target, (page.parent / path).resolve()))
    for code in _CODE.findall(text):
        path = code.split(":", 1)[0].rstrip(".,;")
        if path.startswith(TOP) and not _PLACEHOLDER.search(path):
            found.append((code, ROOT / path))
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_path_a_page_names_exists(page: Path) -> None:
    missing = [written for written, path in named_paths(page) if not path.exists() and written not in MADE_BY_THE_READER]
    assert missing == []


def test_the_readme_reads_as_a_readme() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert text.splitlines()[3:5] == [
        "make demo    # creates .venv if missing, installs Polis + the offline model, runs the demo experiment",
        "make test    # creates .venv if missing, installs Polis with test extras + the offline model, runs ruff, mypy and the tests",
    ]


def test_the_checker_sees_a_missing_path(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("See [the guide](guide.md), `engine/nope.py:12`, `docs/<id>.md` and [site](https://x.org/a.md).")
    assert [written for written, _ in named_paths(page)] == ["guide.md", "engine/nope.py:12"]
