"""Skill discovery: builtin, custom and env sources, naming, overrides, and broken SKILL.md files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from engine.agent.skills.discovery import BUILTIN_DIR, discover_skills, env_skill_dirs_of, group_env_skill_dirs
from engine.agent.skills.model import SkillError, parse_skill
from engine.env.proxy import EnvRouterProxy


def write_skill(root: Path, name: str, front: str = "", *, body: str = "Do the thing.", script: str | None = None,
                description: str | None = "A test skill.") -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    head = f"name: {name}\n" + (f"description: {description}\n" if description is not None else "") + front
    (directory / "SKILL.md").write_text(f"---\n{head}---\n{body}\n", encoding="utf-8")
    if script is not None:
        (directory / "scripts").mkdir()
        (directory / "scripts" / "main.py").write_text(script, encoding="utf-8")
    return directory


def test_discovers_builtin_custom_and_env_skills_with_their_sources(tmp_path: Path) -> None:
    write_skill(tmp_path / "builtin", "greeting")
    write_skill(tmp_path / "custom", "gossip")
    write_skill(tmp_path / "mobility", "navigation")

    skills = discover_skills(builtin_dir=tmp_path / "builtin", custom_dir=tmp_path / "custom",
                             env_dirs={"MobilitySpace": [tmp_path / "mobility"]})

    assert {name: s.source for name, s in skills.items()} == {
        "greeting": "builtin", "gossip": "custom", "MobilitySpace/navigation": "env:MobilitySpace",
    }
    assert skills["MobilitySpace/navigation"].path == tmp_path / "mobility" / "navigation"
    assert list(skills) == sorted(skills)


def test_custom_skill_overrides_builtin_and_the_override_is_noted(tmp_path: Path) -> None:
    write_skill(tmp_path / "builtin", "greeting", description="Built-in greeting.")
    write_skill(tmp_path / "custom", "greeting", description="My greeting.")
    warnings: list[str] = []

    skills = discover_skills(builtin_dir=tmp_path / "builtin", custom_dir=tmp_path / "custom", env_dirs={}, warnings=warnings)

    assert skills["greeting"].source == "custom"
    assert skills["greeting"].description == "My greeting."
    assert warnings == ["custom skill 'greeting' overrides the built-in one"]


def test_env_skills_of_two_modules_with_one_name_do_not_collide(tmp_path: Path) -> None:
    write_skill(tmp_path / "a", "navigation")
    write_skill(tmp_path / "b", "navigation")
    write_skill(tmp_path / "builtin", "navigation")

    skills = discover_skills(builtin_dir=tmp_path / "builtin", custom_dir=None,
                             env_dirs={"CitySpace": [tmp_path / "a"], "TransitSpace": [tmp_path / "b"]})

    assert set(skills) == {"navigation", "CitySpace/navigation", "TransitSpace/navigation"}


def test_same_env_skill_in_two_dirs_of_one_module_keeps_the_first(tmp_path: Path) -> None:
    first = write_skill(tmp_path / "a", "navigation")
    write_skill(tmp_path / "b", "navigation")
    warnings: list[str] = []

    skills = discover_skills(builtin_dir=None, custom_dir=None, env_dirs={"City": [tmp_path / "a", tmp_path / "b"]},
                             warnings=warnings)

    assert skills["City/navigation"].path == first
    assert len(warnings) == 1 and "already comes from" in warnings[0]


def test_missing_roots_and_directories_without_skill_md_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "custom" / "notes").mkdir(parents=True)
    (tmp_path / "custom" / "README.md").write_text("not a skill")
    warnings: list[str] = []

    skills = discover_skills(builtin_dir=tmp_path / "nowhere", custom_dir=tmp_path / "custom",
                             env_dirs={"Gone": [tmp_path / "gone"]}, warnings=warnings)

    assert skills == {} and warnings == []


BROKEN = {
    "no front matter": "# Just a heading\n",
    "unclosed front matter": "---\nname: broken\ndescription: x\n",
    "invalid yaml": "---\nname: [broken\ndescription: x\n---\n",
    "front matter not a mapping": "---\n- name\n---\n",
    "missing description": "---\nname: broken\n---\nbody\n",
    "name differs from directory": "---\nname: other\ndescription: x\n---\n",
    "name with capitals": "---\nname: Broken\ndescription: x\n---\n",
    "hook without a script": "---\nname: broken\ndescription: x\npre_step: true\n---\n",
    "hook flag not a bool": "---\nname: broken\ndescription: x\npost_step: sometimes\n---\n",
    "requires not a list": "---\nname: broken\ndescription: x\nrequires: other\n---\n",
    "requires itself": "---\nname: broken\ndescription: x\nrequires: [broken]\n---\n",
    "script outside scripts/": "---\nname: broken\ndescription: x\nscript: ../evil.py\n---\n",
    "script missing": "---\nname: broken\ndescription: x\nscript: scripts/nope.py\n---\n",
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_skill_md_is_skipped_with_a_warning_and_others_still_load(tmp_path: Path, case: str) -> None:
    (tmp_path / "custom" / "broken").mkdir(parents=True)
    (tmp_path / "custom" / "broken" / "SKILL.md").write_text(BROKEN[case], encoding="utf-8")
    write_skill(tmp_path / "custom", "fine")
    warnings: list[str] = []

    skills = discover_skills(builtin_dir=None, custom_dir=tmp_path / "custom", env_dirs={}, warnings=warnings)

    assert list(skills) == ["fine"]
    assert len(warnings) == 1
    assert warnings[0].startswith("skipped skill: ") and "broken" in warnings[0]


def test_parse_skill_error_names_the_file_and_the_key(tmp_path: Path) -> None:
    write_skill(tmp_path, "quiet", description=None)

    with pytest.raises(SkillError, match=r"quiet/SKILL.md: 'description' must be a non-empty string"):
        parse_skill(tmp_path / "quiet", "custom")


def test_script_defaults_to_scripts_main_py_when_present(tmp_path: Path) -> None:
    with_script = parse_skill(write_skill(tmp_path, "with", script="def entrypoint(argv, ctx):\n    return 'hi'\n"), "custom")
    without = parse_skill(write_skill(tmp_path, "without"), "custom")

    assert with_script.script == "scripts/main.py"
    assert without.script is None and without.script_path is None


def test_front_matter_fields_are_parsed(tmp_path: Path) -> None:
    directory = write_skill(tmp_path, "planner", textwrap.dedent("""\
        script: scripts/run.py
        pre_step: true
        post_step: false
        requires: [clock, clock, notes]
        license: MIT
    """), body="# Planner\nPlan things.")
    (directory / "scripts").mkdir()
    (directory / "scripts" / "run.py").write_text("def pre_step(ctx):\n    return None\n")

    skill = parse_skill(directory, "builtin")

    assert (skill.script, skill.pre_step, skill.post_step, skill.requires) == ("scripts/run.py", True, False, ("clock", "notes"))
    assert skill.read_body() == "# Planner\nPlan things."


def test_builtin_skills_parse_cleanly() -> None:
    warnings: list[str] = []

    skills = discover_skills(builtin_dir=BUILTIN_DIR, custom_dir=None, env_dirs={}, warnings=warnings)

    assert warnings == []
    assert {"daily-planning", "emotion-appraisal"} <= set(skills)
    assert skills["daily-planning"].post_step and skills["daily-planning"].script == "scripts/plan.py"
    assert skills["emotion-appraisal"].pre_step and skills["emotion-appraisal"].script == "scripts/appraise.py"


def test_group_env_skill_dirs_takes_pairs_or_infers_the_module_from_bare_paths(tmp_path: Path) -> None:
    grouped = group_env_skill_dirs([
        ("MobilitySpace", str(tmp_path / "x")),
        str(tmp_path / "economy_space_agent_skills"),
        str(tmp_path / "city_space" / "agent_skills"),
        ["MobilitySpace", str(tmp_path / "y")],
    ])

    assert grouped == {
        "MobilitySpace": [tmp_path / "x", tmp_path / "y"],
        "economy_space": [tmp_path / "economy_space_agent_skills"],
        "city_space": [tmp_path / "city_space" / "agent_skills"],
    }


def test_env_skill_dirs_of_reads_an_in_process_router_or_the_proxy(tmp_path: Path) -> None:
    class MapSpace:
        @classmethod
        def skill_dirs(cls) -> list[Path]:
            return [tmp_path / "map_skills"]

    class QuietSpace:
        @classmethod
        def skill_dirs(cls) -> list[Path]:
            return []

    class Router:
        env_modules = [MapSpace(), QuietSpace()]

    proxy = EnvRouterProxy(address="tcp://x", key="k", env_skill_dirs=(str(tmp_path / "map_space_agent_skills"),))

    assert env_skill_dirs_of(Router()) == {"MapSpace": [tmp_path / "map_skills"]}
    assert env_skill_dirs_of(proxy) == {"map_space": [tmp_path / "map_space_agent_skills"]}
    assert env_skill_dirs_of(object()) == {}
