"""A skill on disk: ``SKILL.md`` (YAML front matter + instructions) and optional ``scripts/``.

Front matter keys (between the first two ``---`` lines of ``SKILL.md``):

- ``name`` (required): lowercase letters, digits and ``-``; equal to the directory name.
- ``description`` (required): one line shown in the skill catalog before activation.
- ``script``: entry file under ``scripts/`` (default ``scripts/main.py`` when that file exists).
- ``pre_step`` / ``post_step``: ``true`` runs the script's ``pre_step(ctx)`` / ``post_step(ctx)``
  before / after each agent step while the skill is active.
- ``requires``: names of other skills activated together with this one.

Other keys (``license``, ``metadata``, ...) are allowed and ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from engine.errors import AgentError

__all__ = ["DEFAULT_SCRIPT", "SKILL_FILE", "SkillError", "SkillInfo", "parse_skill", "split_front_matter"]

SKILL_FILE = "SKILL.md"
DEFAULT_SCRIPT = "scripts/main.py"
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_MAX_DESCRIPTION = 300


class SkillError(AgentError):
    """A skill that cannot be loaded or run (bad ``SKILL.md``, missing script, bad state name)."""


@dataclass(frozen=True)
class SkillInfo:
    """What discovery knows about one skill; the body of ``SKILL.md`` is read only on activation."""

    name: str  #: catalog name; env skills are ``<Module>/<name>``
    description: str  #: one line, for the catalog
    source: str  #: ``builtin``, ``custom`` or ``env:<Module>``
    path: Path  #: the skill directory
    script: str | None = None  #: entry file relative to ``path`` (``None``: no script)
    pre_step: bool = False  #: run ``pre_step(ctx)`` before each step while active
    post_step: bool = False  #: run ``post_step(ctx)`` after each step while active
    requires: tuple[str, ...] = ()  #: skills activated together with this one

    @property
    def script_path(self) -> Path | None:
        return self.path / self.script if self.script else None

    def read_body(self) -> str:
        """The instructions of ``SKILL.md`` (the text after the front matter).

        Raises:
            SkillError: the file is gone or unreadable since discovery.
        """
        try:
            text = (self.path / SKILL_FILE).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise SkillError(f"{self.path / SKILL_FILE}: cannot read: {error}") from None
        return split_front_matter(text, self.path / SKILL_FILE)[1].strip()


def split_front_matter(text: str, where: Path | str = SKILL_FILE) -> tuple[dict[str, Any], str]:
    """Split ``SKILL.md`` text into its front matter mapping and its body.

    Raises:
        SkillError: no front matter, unterminated, not YAML, or not a mapping.
    """
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{where}: must start with a '---' line opening the YAML front matter")
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise SkillError(f"{where}: front matter is not closed by a second '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as error:
        raise SkillError(f"{where}: front matter is not valid YAML: {error}") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{where}: front matter must be a mapping of keys, got {type(meta).__name__}")
    return meta, "".join(lines[end + 1:])


@lru_cache(maxsize=1024)
def _front_matter_cached(text: str, where: str) -> str:
    meta, _ = split_front_matter(text, Path(where))
    return json.dumps(meta, default=str)


def _front_matter(text: str, where: str) -> dict[str, Any]:
    return json.loads(_front_matter_cached(text, where))


def parse_skill(directory: Path, source: str) -> SkillInfo:
    """Read ``directory/SKILL.md`` into a :class:`SkillInfo`.

    Args:
        directory: the skill directory.
        source: ``builtin``, ``custom`` or ``env:<Module>``.

    Returns:
        The skill, named by its front matter ``name`` (discovery prefixes env skills).

    Raises:
        SkillError: with the file and the offending key when anything is wrong.
    """
    directory = Path(directory)
    file = directory / SKILL_FILE
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SkillError(f"{file}: cannot read: {error}") from None
    # Every agent restore rediscovers skills; parsing YAML each time dominated the agent-step.
    # The parsed front matter is cached per process by the file's exact text.
    meta = _front_matter(text, str(file))

    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SkillError(f"{file}: 'name' must be lowercase letters, digits and '-' (got {name!r})")
    if name != directory.name:
        raise SkillError(f"{file}: 'name' {name!r} differs from its directory name {directory.name!r}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{file}: 'description' must be a non-empty string")
    description = " ".join(description.split())
    if len(description) > _MAX_DESCRIPTION:
        raise SkillError(f"{file}: 'description' is {len(description)} characters; keep it under {_MAX_DESCRIPTION}")

    flags = {}
    for key in ("pre_step", "post_step"):
        value = meta.get(key, False)
        if not isinstance(value, bool):
            raise SkillError(f"{file}: {key!r} must be true or false (got {value!r})")
        flags[key] = value

    requires = meta.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) and r for r in requires):
        raise SkillError(f"{file}: 'requires' must be a list of skill names (got {requires!r})")
    if name in requires:
        raise SkillError(f"{file}: a skill cannot require itself")

    script = _script(meta.get("script"), directory, file)
    if script is None and (flags["pre_step"] or flags["post_step"]):
        raise SkillError(f"{file}: pre_step/post_step hooks need a script (none declared and no {DEFAULT_SCRIPT})")
    return SkillInfo(
        name=name, description=description, source=source, path=directory, script=script,
        pre_step=flags["pre_step"], post_step=flags["post_step"], requires=tuple(dict.fromkeys(requires)),
    )


def _script(value: Any, directory: Path, file: Path) -> str | None:
    if value is None:
        return DEFAULT_SCRIPT if (directory / DEFAULT_SCRIPT).is_file() else None
    if not isinstance(value, str):
        raise SkillError(f"{file}: 'script' must be a path string (got {value!r})")
    relative = PurePosixPath(value)
    if relative.is_absolute() or ".." in relative.parts or relative.parts[:1] != ("scripts",) or relative.suffix != ".py":
        raise SkillError(f"{file}: 'script' must be a .py file under scripts/ (got {value!r})")
    resolved = (directory / relative).resolve()
    if not resolved.is_relative_to(directory.resolve()) or not resolved.is_file():
        raise SkillError(f"{file}: script {value!r} does not exist inside the skill directory")
    return relative.as_posix()
