"""Skill scripts run in-process: results, errors as text, the time limit, and the context's state files."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from engine.agent.skills.model import SkillError, SkillInfo
from engine.agent.skills.runner import SkillContext, run_skill_function, timed_out_scripts
from engine.agent.workspace import DirWorkspace

NOW = datetime(2024, 3, 4, 9, 30)


def skill_with(tmp_path: Path, code: str, name: str = "probe") -> SkillInfo:
    directory = tmp_path / "skills" / name
    (directory / "scripts").mkdir(parents=True)
    (directory / "scripts" / "main.py").write_text(textwrap.dedent(code), encoding="utf-8")
    return SkillInfo(name=name, description="probe", source="custom", path=directory, script="scripts/main.py")


@pytest.fixture
def ctx(tmp_path: Path) -> SkillContext:
    (tmp_path / "ws" / "state").mkdir(parents=True)
    return SkillContext(agent_id=7, profile={"name": "Ada", "tags": ["x"]}, now=NOW, workspace=DirWorkspace(tmp_path / "ws"), skill="probe")


async def test_entrypoint_gets_argv_and_ctx_and_a_dict_comes_back_as_json(tmp_path: Path, ctx: SkillContext) -> None:
    skill = skill_with(tmp_path, """
        def entrypoint(argv, ctx):
            ctx.log("looked")
            return {"argv": argv, "agent": ctx.agent_id, "name": ctx.profile["name"], "now": ctx.now.isoformat()}
    """)

    run = await run_skill_function(skill, "entrypoint", ctx, argv=["a", "b c"])

    assert run.status == "ok"
    assert json.loads(run.output) == {"argv": ["a", "b c"], "agent": 7, "name": "Ada", "now": "2024-03-04T09:30:00"}
    assert run.logs == ("looked",)
    assert run.record(["a", "b c"])["status"] == "ok"


async def test_string_results_pass_through_and_hooks_may_return_none(tmp_path: Path, ctx: SkillContext) -> None:
    skill = skill_with(tmp_path, """
        def entrypoint(argv, ctx):
            return "plain text"
        def pre_step(ctx):
            return None
    """)

    assert (await run_skill_function(skill, "entrypoint", ctx)).output == "plain text"
    assert (await run_skill_function(skill, "pre_step", ctx)).status == "ok"


async def test_exception_becomes_error_text_with_the_script_line(tmp_path: Path, ctx: SkillContext) -> None:
    skill = skill_with(tmp_path, """
        def entrypoint(argv, ctx):
            return helper()

        def helper():
            raise ValueError("no plan for a holiday")
    """)

    run = await run_skill_function(skill, "entrypoint", ctx)

    assert run.status == "error"
    assert run.output == "error: ValueError: no plan for a holiday (at scripts/main.py:6)"


@pytest.mark.parametrize(("code", "message"), [
    ("def other(argv, ctx):\n    return 'x'\n", "error: scripts/main.py defines no entrypoint(argv, ctx)"),
    ("def entrypoint(argv, ctx):\n    return 42\n", "error: entrypoint returned int; return a dict or a str"),
    ("def entrypoint(argv, ctx):\n    return None\n", "error: entrypoint returned NoneType; return a dict or a str"),
    ("def entrypoint(argv, ctx):\n    return {'when': object()}\n", "error: entrypoint returned a dict that is not JSON"),
    ("def entrypoint(argv, ctx)\n    return 'x'\n", "error: SyntaxError"),
    ("import sys\ndef entrypoint(argv, ctx):\n    sys.exit(3)\n", "error: SystemExit: 3"),
])
async def test_bad_scripts_are_reported_as_text(tmp_path: Path, ctx: SkillContext, code: str, message: str) -> None:
    run = await run_skill_function(skill_with(tmp_path, code), "entrypoint", ctx)

    assert run.status == "error"
    assert run.output.startswith(message)


async def test_timeout_stops_waiting_reports_and_refuses_further_calls(tmp_path: Path, ctx: SkillContext) -> None:
    release, finished = tmp_path / "release", tmp_path / "finished"
    skill = skill_with(tmp_path, f"""
        import time
        from pathlib import Path

        def entrypoint(argv, ctx):
            deadline = time.monotonic() + 600  # only so a thread this test left behind ends some time
            while not Path({str(release)!r}).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            Path({str(finished)!r}).touch()
            return "finally"
    """, name="runaway")
    try:
        # The outer bound only turns a call that waits for the script into a failure instead of a hang.
        run = await asyncio.wait_for(run_skill_function(skill, "entrypoint", ctx, timeout_s=0.2), 120)

        assert run.status == "timeout"
        assert "did not finish within 0.2s" in run.output and run.output.startswith("error:")
        assert not finished.exists()  # it stopped waiting: the script still runs (until released below)
        assert skill.script_path.resolve() in timed_out_scripts()

        again = await run_skill_function(skill, "pre_step", ctx, timeout_s=5)
        assert again.status == "refused"
        assert "disabled in this process" in again.output
    finally:
        release.touch()


async def test_two_skills_with_scripts_main_py_load_as_separate_modules(tmp_path: Path, ctx: SkillContext) -> None:
    one = skill_with(tmp_path, "def entrypoint(argv, ctx):\n    return 'one'\n", name="one")
    two = skill_with(tmp_path, "def entrypoint(argv, ctx):\n    return 'two'\n", name="two")

    assert [(await run_skill_function(s, "entrypoint", ctx)).output for s in (one, two, one)] == ["one", "two", "one"]


async def test_an_edited_script_is_reloaded(tmp_path: Path, ctx: SkillContext) -> None:
    skill = skill_with(tmp_path, "def entrypoint(argv, ctx):\n    return 'v1'\n")
    assert (await run_skill_function(skill, "entrypoint", ctx)).output == "v1"

    skill.script_path.write_text("def entrypoint(argv, ctx):\n    return 'version 2'\n")
    stat = skill.script_path.stat()
    os.utime(skill.script_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))

    assert (await run_skill_function(skill, "entrypoint", ctx)).output == "version 2"


def test_write_state_replaces_the_file_and_read_state_reads_it(ctx: SkillContext, tmp_path: Path) -> None:
    assert ctx.read_state("mood") == {}

    ctx.write_state("mood", {"label": "calm", "note": "平静"})
    ctx.write_state("mood", {"label": "content"})

    assert ctx.read_state("mood") == {"label": "content"}
    assert json.loads((tmp_path / "ws" / "state" / "mood.json").read_text(encoding="utf-8")) == {"label": "content"}
    assert [p.name for p in (tmp_path / "ws" / "state").iterdir()] == ["mood.json"]  # no temp files left


@pytest.mark.parametrize("name", ["Mood", "../config", "a-b", "mood.json", "state/x", "", "x1", "skills", "todo"])
def test_state_names_are_restricted(ctx: SkillContext, name: str) -> None:
    with pytest.raises(SkillError):
        ctx.write_state(name, {"x": 1})


def test_write_state_refuses_data_that_is_not_a_json_object(ctx: SkillContext) -> None:
    with pytest.raises(SkillError, match="needs a dict"):
        ctx.write_state("mood", ["calm"])  # type: ignore[arg-type]
    with pytest.raises(SkillError, match="not JSON"):
        ctx.write_state("mood", {"at": object()})
    assert ctx.read_state("mood") == {}


def test_read_state_refuses_a_corrupt_file(ctx: SkillContext, tmp_path: Path) -> None:
    (tmp_path / "ws" / "state" / "mood.json").write_text("{not json")

    with pytest.raises(SkillError, match="unreadable"):
        ctx.read_state("mood")


def test_the_profile_is_a_read_only_copy(ctx: SkillContext) -> None:
    with pytest.raises(TypeError):
        ctx.profile["name"] = "Eve"  # type: ignore[index]
    ctx.profile["tags"].append("y")  # a nested value is the copy's, not the agent's

    profile = {"name": "Ada", "tags": ["x"]}
    fresh = SkillContext(agent_id=1, profile=profile, now=None, workspace=ctx._workspace, skill="probe")
    fresh.profile["tags"].append("y")
    assert profile == {"name": "Ada", "tags": ["x"]}
