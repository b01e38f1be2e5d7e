"""SkillTools: the agent's skills, offered through activate / deactivate / read / execute tools.

Progressive disclosure: the prompt carries :meth:`SkillTools.catalog_text` (names and one-line
descriptions) until a skill is activated; from then on :meth:`SkillTools.active_text` carries its
full instructions. The active set lives in ``state/skills.json``, so it survives the agent being
rebuilt on another worker; skill run logs go to ``.runtime/logs/skill_runs.jsonl`` on ``save``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.agent.skills.discovery import BUILTIN_DIR, discover_skills
from engine.agent.skills.model import SkillError, SkillInfo
from engine.agent.skills.runner import DEFAULT_TIMEOUT_S, SkillContext, SkillRun, run_skill_function
from engine.agent.tools import AgentTool
from engine.agent.workspace import AgentWorkspace

__all__ = [
    "ACTIVATE_SKILL",
    "DEACTIVATE_SKILL",
    "EXECUTE_SKILL_SCRIPT",
    "READ_SKILL_FILE",
    "RUNS_LOG",
    "STATE_FILE",
    "ExecuteSkillScriptArgs",
    "ReadSkillFileArgs",
    "SkillNameArgs",
    "SkillTools",
]

STATE_FILE = "state/skills.json"
RUNS_LOG = ".runtime/logs/skill_runs.jsonl"
_MAX_READ = 64_000
_MAX_BODY = 20_000
_MAX_LISTING = 100


class SkillNameArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, description="a skill name from the skill catalog")


class ReadSkillFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, description="a skill name from the skill catalog")
    path: str = Field(min_length=1, max_length=500, description="a file inside the skill, e.g. SKILL.md or scripts/main.py ('.' lists files)")


class ExecuteSkillScriptArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, description="an active skill")
    args: list[str] = Field(default_factory=list, max_length=32, description="command-line style arguments for the script")


ACTIVATE_SKILL = AgentTool("activate_skill", "Load a skill's full instructions into your context", SkillNameArgs, readonly=False)
DEACTIVATE_SKILL = AgentTool("deactivate_skill", "Remove an active skill's instructions from your context", SkillNameArgs, readonly=False)
READ_SKILL_FILE = AgentTool("read_skill_file", "Read a file inside a skill's directory", ReadSkillFileArgs, readonly=True)
EXECUTE_SKILL_SCRIPT = AgentTool("execute_skill_script", "Run an active skill's script with arguments", ExecuteSkillScriptArgs, readonly=False)
_TOOLS = {t.name: t for t in (ACTIVATE_SKILL, DEACTIVATE_SKILL, READ_SKILL_FILE, EXECUTE_SKILL_SCRIPT)}


class SkillTools:
    """Skills of one agent: discovery at construction, the active set, script runs.

    Args:
        workspace: the agent's workspace (``custom/skills/`` is scanned, ``state/`` written).
        env_skill_dirs: env module class name -> its skill directories (see ``env_skill_dirs_of``).
        profile: the agent's profile, given read-only to scripts.
        clock: returns the current simulation time (``None`` before the first step).
        agent_id: given to scripts.
        builtin_dir: the built-in skills (tests pass their own).
        timeout_s: wall-clock limit of one script call.

    Raises:
        WorkspaceError: ``state/skills.json`` is corrupt.
    """

    def __init__(
        self,
        workspace: AgentWorkspace,
        *,
        env_skill_dirs: Mapping[str, Iterable[Path]],
        profile: Mapping[str, Any],
        clock: Callable[[], datetime | None],
        agent_id: int = -1,
        builtin_dir: Path | None = BUILTIN_DIR,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.workspace = workspace
        self.profile = profile
        self.clock = clock
        self.agent_id = agent_id
        self.timeout_s = timeout_s
        self.warnings: list[str] = []  #: broken skills skipped, overrides, vanished active skills
        self.skills: dict[str, SkillInfo] = discover_skills(
            builtin_dir=builtin_dir, custom_dir=workspace.local_dir("custom/skills"), env_dirs=env_skill_dirs,
            warnings=self.warnings,
        )
        self._active: list[str] = []
        self._dirty = False
        self._runs: list[dict[str, Any]] = []
        if workspace.exists(STATE_FILE):
            saved = workspace.read_json(STATE_FILE).get("active", [])
            for name in saved:
                if name in self.skills:
                    self._active.append(name)
                else:
                    self.warnings.append(f"active skill {name!r} is no longer available; deactivated")
                    self._dirty = True

    # ---- Toolset -----------------------------------------------------------------------------
    def tools(self, *, readonly: bool) -> dict[str, AgentTool]:
        return {n: t for n, t in _TOOLS.items() if t.readonly or not readonly}

    async def dispatch(self, name: str, args: dict[str, Any], *, readonly: bool) -> str:
        if name == ACTIVATE_SKILL.name:
            return self.activate(args["name"])
        if name == DEACTIVATE_SKILL.name:
            return self.deactivate(args["name"])
        if name == READ_SKILL_FILE.name:
            return self.read_file(args["name"], args["path"])
        if name == EXECUTE_SKILL_SCRIPT.name:
            return await self.execute(args["name"], list(args.get("args") or []))
        return f"error: {name!r} is not a skill tool"

    def save(self) -> None:
        """Write the active set (when it changed) and append this step's script runs to the log."""
        if self._dirty:
            self.workspace.write_json(STATE_FILE, {"active": self._active})
            self._dirty = False
        self.workspace.append_jsonl(RUNS_LOG, self._runs)
        self._runs = []

    # ---- prompt text -------------------------------------------------------------------------
    @property
    def active(self) -> tuple[str, ...]:
        return tuple(self._active)

    def catalog_text(self) -> str:
        """One line per available skill: name, description, and whether it is active."""
        if not self.skills:
            return "(no skills available)"
        return "\n".join(
            f"- {name}: {skill.description}" + (" [active]" if name in self._active else "")
            for name, skill in self.skills.items()
        )

    def active_text(self) -> str:
        """The instructions of every active skill, in activation order ("" when none)."""
        return "\n\n".join(self._section(name) for name in self._active)

    def _section(self, name: str) -> str:
        try:
            body = self.skills[name].read_body()
        except SkillError as error:
            return f"## Skill: {name}\n(unavailable: {error})"
        if len(body) > _MAX_BODY:
            body = body[:_MAX_BODY] + "\n... (truncated; read_skill_file SKILL.md for the rest)"
        return f"## Skill: {name}\n{body}"

    # ---- tools -------------------------------------------------------------------------------
    def _unknown(self, name: str) -> str:
        near = difflib.get_close_matches(name, list(self.skills), n=3)
        return f"error: no skill named {name!r}" + (f"; did you mean {', '.join(near)}?" if near else "")

    def _requirement(self, skill: SkillInfo, wanted: str) -> str | None:
        # An env skill's requires name its module's own skills first, then builtin/custom ones.
        module = skill.source.removeprefix("env:") if skill.source.startswith("env:") else None
        for candidate in ([f"{module}/{wanted}"] if module else []) + [wanted]:
            if candidate in self.skills:
                return candidate
        return None

    def _closure(self, name: str) -> list[str]:
        """``name`` and what it requires, dependencies first. Raises SkillError on a missing one."""
        order: list[str] = []

        def visit(current: str, path: tuple[str, ...]) -> None:
            if current in order or current in path:
                return
            skill = self.skills[current]
            for wanted in skill.requires:
                found = self._requirement(skill, wanted)
                if found is None:
                    raise SkillError(f"{current!r} requires {wanted!r}, which is not available")
                visit(found, (*path, current))
            order.append(current)

        visit(name, ())
        return order

    def activate(self, name: str) -> str:
        """Activate ``name`` and its requirements; return their instructions."""
        if name not in self.skills:
            return self._unknown(name)
        if name in self._active:
            return f"skill {name!r} is already active"
        try:
            needed = [n for n in self._closure(name) if n not in self._active]
        except SkillError as error:
            return f"error: cannot activate {name!r}: {error}"
        self._active.extend(needed)
        self._dirty = True
        extra = [n for n in needed if n != name]
        head = f"activated {name!r}" + (f" with its requirements {', '.join(map(repr, extra))}" if extra else "")
        return head + ". Instructions:\n\n" + "\n\n".join(self._section(n) for n in needed)

    def deactivate(self, name: str) -> str:
        """Deactivate ``name`` (refused while an active skill requires it)."""
        if name not in self._active:
            return f"error: skill {name!r} is not active" if name in self.skills else self._unknown(name)
        dependents = [a for a in self._active if a != name and name in
                      {self._requirement(self.skills[a], w) for w in self.skills[a].requires}]
        if dependents:
            return f"error: {name!r} is required by active {', '.join(map(repr, dependents))}; deactivate those first"
        self._active.remove(name)
        self._dirty = True
        return f"deactivated {name!r}"

    def read_file(self, name: str, path: str) -> str:
        """Text of a file inside the skill's directory (``.`` or a directory: its file list)."""
        if name not in self.skills:
            return self._unknown(name)
        root = self.skills[name].path.resolve()
        relative = PurePosixPath(path.replace("\\", "/"))
        if "\x00" in path or relative.is_absolute() or ".." in relative.parts or path.startswith("~"):
            return f"error: {path!r} must be a relative path inside the skill, without '..'"
        target = (root / relative).resolve()
        if not target.is_relative_to(root):
            return f"error: {path!r} leads outside the skill directory"
        if target.is_dir():
            files = sorted(p.relative_to(root).as_posix() for p in target.rglob("*")
                           if p.is_file() and "__pycache__" not in p.parts and p.resolve().is_relative_to(root))
            more = f"\n... and {len(files) - _MAX_LISTING} more" if len(files) > _MAX_LISTING else ""
            return "\n".join(files[:_MAX_LISTING]) + more if files else "(no files)"
        if not target.is_file():
            return f"error: {path!r} does not exist in skill {name!r}"
        if target.stat().st_size > _MAX_READ:
            return f"error: {path!r} is larger than {_MAX_READ} bytes"
        try:
            return target.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return f"error: {path!r} is not UTF-8 text"

    def _context(self, name: str, observations: Iterable[str] = ()) -> SkillContext:
        return SkillContext(agent_id=self.agent_id, profile=self.profile, now=self.clock(),
                            workspace=self.workspace, skill=name, observations=observations)

    def _record(self, run: SkillRun, argv: list[str] | None) -> None:
        self._runs.append({"t": _iso(self.clock()), **run.record(argv)})

    async def execute(self, name: str, args: list[str]) -> str:
        """Run the ``entrypoint`` of an active skill's script."""
        if name not in self.skills:
            return self._unknown(name)
        if name not in self._active:
            return f"error: skill {name!r} is not active; activate_skill it first and read its instructions"
        run = await run_skill_function(self.skills[name], "entrypoint", self._context(name), argv=args, timeout_s=self.timeout_s)
        self._record(run, args)
        return run.output or "(no output)"

    async def run_hooks(self, phase: Literal["pre_step", "post_step"], *, observations: Iterable[str] = ()) -> dict[str, str]:
        """Run the ``phase`` hook of every active skill that declares it, in activation order.

        Args:
            phase: ``pre_step`` (before the step's ReAct loop) or ``post_step`` (after it).
            observations: this step's observations, given to the hooks as ``ctx.observations``.

        Returns:
            Skill name -> the hook's output (``error: ...`` when it failed).
        """
        if phase not in ("pre_step", "post_step"):
            raise ValueError(f"phase must be 'pre_step' or 'post_step', got {phase!r}")
        seen = tuple(observations)
        outputs: dict[str, str] = {}
        for name in self._active:
            skill = self.skills[name]
            if getattr(skill, phase):
                run = await run_skill_function(skill, phase, self._context(name, seen), timeout_s=self.timeout_s)
                self._record(run, None)
                outputs[name] = run.output
        return outputs


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None
