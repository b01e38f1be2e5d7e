"""Find skills in the three places they live, and name them without collisions.

Sources, in the order they are scanned:

1. **builtin** — ``engine/agent/skills/builtin/<name>/`` shipped with Polis; named ``<name>``.
2. **custom** — the agent's ``custom/skills/<name>/``; named ``<name>``. A custom skill with the name
   of a built-in one *replaces* it (a researcher's override), recorded as a note in ``warnings``.
3. **env** — each env module's ``skill_dirs()``; source ``env:<Module>``, named ``<Module>/<name>``, so
   they never collide with builtin or custom skills, nor with another module's skills.

Discovery is a plain directory scan with no cache: the toolset runs it at every restore (between
ticks), so a skill dropped into ``custom/skills/`` is picked up without a restart. A directory
without ``SKILL.md``, or whose name starts with ``.`` or ``_``, is ignored; a broken ``SKILL.md``
is skipped and described in ``warnings``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.agent.skills.model import SKILL_FILE, SkillError, SkillInfo, parse_skill

__all__ = ["BUILTIN_DIR", "discover_skills", "env_skill_dirs_of", "group_env_skill_dirs"]

log = logging.getLogger(__name__)

#: the skills shipped with Polis
BUILTIN_DIR = Path(__file__).parent / "builtin"


def discover_skills(
    *,
    builtin_dir: Path | None = BUILTIN_DIR,
    custom_dir: Path | None,
    env_dirs: Mapping[str, Iterable[Path]],
    warnings: list[str] | None = None,
) -> dict[str, SkillInfo]:
    """Scan all sources; return skills by catalog name (sorted).

    Args:
        builtin_dir: the built-in skills (``None`` for none).
        custom_dir: the agent's ``custom/skills/`` (``None`` or missing for none).
        env_dirs: env module class name -> its skill directories.
        warnings: broken skills and overrides are appended here (and logged).

    Returns:
        ``{name: SkillInfo}``; env skills are named ``<Module>/<name>``.
    """
    notes = warnings if warnings is not None else []
    found: dict[str, SkillInfo] = {}
    if builtin_dir is not None:
        for skill in _scan_shared(Path(builtin_dir), "builtin", notes):
            found[skill.name] = skill
    if custom_dir is not None:
        for skill in _scan(Path(custom_dir), "custom", notes):
            if skill.name in found:
                _note(notes, f"custom skill {skill.name!r} overrides the built-in one")
            found[skill.name] = skill
    for module, dirs in env_dirs.items():
        for directory in dirs:
            for skill in _scan_shared(Path(directory), f"env:{module}", notes):
                name = f"{module}/{skill.name}"
                if name in found:
                    _note(notes, f"{skill.path}: skipped, {name!r} already comes from {found[name].path}")
                    continue
                found[name] = replace(skill, name=name)
    return dict(sorted(found.items()))


def _scan_shared(root: Path, source: str, notes: list[str]) -> list[SkillInfo]:
    """Built-in and env skill folders are package code shared by every agent: scan each once per
    process (again only if the folder's entries change), not once per agent restore."""
    try:
        stamp = root.stat().st_mtime_ns
    except OSError:
        return []
    skills, found_notes = _scan_cached(str(root), source, stamp)
    for note in found_notes:
        if note not in notes:
            notes.append(note)
    return list(skills)


@lru_cache(maxsize=64)
def _scan_cached(root: str, source: str, stamp: int) -> tuple[tuple[SkillInfo, ...], tuple[str, ...]]:
    notes: list[str] = []
    return tuple(_scan(Path(root), source, notes)), tuple(notes)


def _scan(root: Path, source: str, notes: list[str]) -> list[SkillInfo]:
    if not root.is_dir():
        return []
    skills = []
    for directory in sorted(root.iterdir()):
        if directory.name.startswith((".", "_")) or not (directory / SKILL_FILE).is_file():
            continue
        try:
            skills.append(parse_skill(directory, source))
        except SkillError as error:
            _note(notes, f"skipped skill: {error}")
    return skills


def _note(notes: list[str], message: str) -> None:
    log.warning("%s", message)
    notes.append(message)


def group_env_skill_dirs(entries: Iterable[Any]) -> dict[str, list[Path]]:
    """Group env skill directories by module, from ``(module, path)`` pairs or bare paths.

    A bare path (what ``EnvRouterProxy.env_skill_dirs`` carries today) is attributed by the
    ``EnvBase.skill_dirs`` convention: ``<pkg>/agent_skills`` -> ``<pkg>``, ``<stem>_agent_skills`` ->
    ``<stem>``, otherwise the directory's own name. That is the module's file name, not its class
    name; pass pairs to get ``env:<ClassName>``.

    Args:
        entries: ``(module, path)`` pairs (tuples or 2-lists) or path strings.

    Returns:
        ``{module: [paths]}`` in first-seen order.
    """
    grouped: dict[str, list[Path]] = {}
    for entry in entries:
        if isinstance(entry, list | tuple):
            module, path = str(entry[0]), Path(entry[1])
        else:
            path = Path(entry)
            if path.name == "agent_skills":
                module = path.parent.name
            elif path.name.endswith("_agent_skills"):
                module = path.name.removesuffix("_agent_skills")
            else:
                module = path.name
        grouped.setdefault(module, []).append(path)
    return grouped


def env_skill_dirs_of(env: Any) -> dict[str, list[Path]]:
    """Env skill directories of whatever ``ServiceProxy.env`` holds.

    An in-process router exposes ``env_modules`` (named by class); an ``EnvRouterProxy`` carries
    ``env_skill_dirs`` (see :func:`group_env_skill_dirs`); anything else has none.
    """
    modules = getattr(env, "env_modules", None)
    if modules is not None:
        grouped: dict[str, list[Path]] = {}
        for module in modules:
            dirs = [Path(d) for d in type(module).skill_dirs()]
            if dirs:
                grouped.setdefault(type(module).__name__, []).extend(dirs)
        return grouped
    return group_env_skill_dirs(getattr(env, "env_skill_dirs", ()) or ())
