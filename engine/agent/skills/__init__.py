"""Agent skills: directories with ``SKILL.md`` and optional scripts, discovered and run for an agent.

``model`` parses a skill, ``discovery`` finds skills (builtin, custom, env modules), ``runner`` runs
their scripts in-process with a time limit. The tools an agent uses are in
``engine.agent.toolsets.skills``.
"""

from engine.agent.skills.discovery import BUILTIN_DIR, discover_skills, env_skill_dirs_of, group_env_skill_dirs
from engine.agent.skills.model import SkillError, SkillInfo, parse_skill
from engine.agent.skills.runner import SkillContext, SkillRun, run_skill_function

__all__ = [
    "BUILTIN_DIR",
    "SkillContext",
    "SkillError",
    "SkillInfo",
    "SkillRun",
    "discover_skills",
    "env_skill_dirs_of",
    "group_env_skill_dirs",
    "parse_skill",
    "run_skill_function",
]
