"""SkillTools: progressive disclosure, the persisted active set, safe file reads, scripts and hooks, built-in skills."""

from __future__ import annotations

import json
import os
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.skills.discovery import env_skill_dirs_of
from engine.agent.toolset import Toolset
from engine.agent.toolsets.skills import SkillTools
from engine.agent.workspace import AgentWorkspace, DirWorkspace
from engine.env.actor import EnvRouterConfig, build_router
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel

MONDAY = datetime(2024, 1, 1, 10, 15)
PROFILE = {"name": "Ada", "age": 36, "occupation": "engineer", "hobbies": ["chess", "running"]}


class Clock:
    def __init__(self, t: datetime | None = MONDAY) -> None:
        self.t = t

    def __call__(self) -> datetime | None:
        return self.t


def write_skill(root: Path, name: str, *, front: str = "", body: str = "", script: str | None = None) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The {name} skill.\n{front}---\n{body or f'BODY-OF-{name}'}\n", encoding="utf-8")
    if script is not None:
        (directory / "scripts").mkdir()
        (directory / "scripts" / "main.py").write_text(textwrap.dedent(script), encoding="utf-8")
    return directory


@pytest.fixture
def ws(tmp_path: Path) -> AgentWorkspace:
    workspace = DirWorkspace(tmp_path / "agents" / "agent_0001")
    workspace.make_dirs()
    return workspace


@pytest.fixture
def custom(ws: AgentWorkspace) -> Path:
    return ws.root / "custom" / "skills"


def tools_for(ws: AgentWorkspace, clock: Clock | None = None, **kwargs: Any) -> SkillTools:
    kwargs.setdefault("env_skill_dirs", {})
    return SkillTools(ws, profile=kwargs.pop("profile", PROFILE), clock=clock or Clock(), agent_id=1, **kwargs)


def test_skill_tools_is_a_toolset_and_readonly_offers_only_reading(ws: AgentWorkspace) -> None:
    tools = tools_for(ws)

    assert isinstance(tools, Toolset)
    assert set(tools.tools(readonly=False)) == {"activate_skill", "deactivate_skill", "read_skill_file", "execute_skill_script"}
    assert set(tools.tools(readonly=True)) == {"read_skill_file"}


def test_catalog_shows_only_names_and_descriptions_until_a_skill_is_activated(ws: AgentWorkspace, custom: Path) -> None:
    write_skill(custom, "gossip", body="SECRET-INSTRUCTIONS for gossip")
    tools = tools_for(ws)

    assert "- gossip: The gossip skill." in tools.catalog_text()
    assert "- daily-planning: Make a plan for today" in tools.catalog_text()
    assert "SECRET-INSTRUCTIONS" not in tools.catalog_text()
    assert tools.active_text() == ""

    reply = tools.activate("gossip")

    assert "SECRET-INSTRUCTIONS for gossip" in reply  # visible in this very loop, before the next prompt
    assert tools.active_text() == "## Skill: gossip\nSECRET-INSTRUCTIONS for gossip"
    assert "- gossip: The gossip skill. [active]" in tools.catalog_text()
    assert "SECRET-INSTRUCTIONS" not in tools.catalog_text()


async def test_activation_persists_across_save_and_a_new_instance(ws: AgentWorkspace) -> None:
    first = tools_for(ws)
    assert "activated 'daily-planning'" in await first.dispatch("activate_skill", {"name": "daily-planning"}, readonly=False)
    first.save()

    second = tools_for(ws)  # as if rebuilt on another worker next tick
    assert second.active == ("daily-planning",)
    assert second.deactivate("daily-planning") == "deactivated 'daily-planning'"
    second.save()

    assert tools_for(ws).active == ()
    assert json.loads((ws.root / "state" / "skills.json").read_text()) == {"active": []}


def test_a_skill_dropped_into_custom_skills_between_ticks_is_discovered(ws: AgentWorkspace, custom: Path) -> None:
    before = tools_for(ws)
    assert "late-arrival" not in before.skills

    write_skill(custom, "late-arrival")
    after = tools_for(ws)

    assert after.skills["late-arrival"].source == "custom"
    assert "activated 'late-arrival'" in after.activate("late-arrival")


def test_env_skills_are_offered_under_their_module_name(ws: AgentWorkspace, tmp_path: Path) -> None:
    write_skill(tmp_path / "city", "navigation", front="requires: [landmarks]\n")
    write_skill(tmp_path / "city", "landmarks")
    tools = tools_for(ws, env_skill_dirs={"CitySpace": [tmp_path / "city"]})

    assert tools.skills["CitySpace/navigation"].source == "env:CitySpace"
    tools.activate("CitySpace/navigation")
    assert tools.active == ("CitySpace/landmarks", "CitySpace/navigation")


def test_requires_activates_dependencies_first(ws: AgentWorkspace, custom: Path) -> None:
    write_skill(custom, "base-habits")
    write_skill(custom, "routine", front="requires: [base-habits, emotion-appraisal]\n")
    write_skill(custom, "morning", front="requires: [routine]\n")
    tools = tools_for(ws)

    reply = tools.activate("morning")

    assert tools.active == ("base-habits", "emotion-appraisal", "routine", "morning")
    assert reply.startswith("activated 'morning' with its requirements 'base-habits', 'emotion-appraisal', 'routine'")
    assert "BODY-OF-base-habits" in reply and "BODY-OF-morning" in reply
    assert tools.deactivate("routine").startswith("error: 'routine' is required by active 'morning'")
    assert tools.deactivate("morning") == "deactivated 'morning'"
    assert tools.active == ("base-habits", "emotion-appraisal", "routine")  # requirements stay until deactivated


def test_a_missing_requirement_activates_nothing(ws: AgentWorkspace, custom: Path) -> None:
    write_skill(custom, "needy", front="requires: [nowhere-to-be-found]\n")
    tools = tools_for(ws)

    assert tools.activate("needy") == "error: cannot activate 'needy': 'needy' requires 'nowhere-to-be-found', which is not available"
    assert tools.active == ()


def test_requirement_cycles_terminate(ws: AgentWorkspace, custom: Path) -> None:
    write_skill(custom, "ping", front="requires: [pong]\n")
    write_skill(custom, "pong", front="requires: [ping]\n")
    tools = tools_for(ws)

    tools.activate("ping")

    assert tools.active == ("pong", "ping")


def test_unknown_names_get_the_nearest_skills(ws: AgentWorkspace) -> None:
    tools = tools_for(ws)

    assert tools.activate("daily-planing") == "error: no skill named 'daily-planing'; did you mean daily-planning?"
    assert tools.deactivate("daily-planning") == "error: skill 'daily-planning' is not active"


def test_read_skill_file_reads_inside_the_skill_and_lists_it(ws: AgentWorkspace) -> None:
    tools = tools_for(ws)

    assert tools.read_file("daily-planning", "SKILL.md").startswith("---\nname: daily-planning")
    assert "def entrypoint" in tools.read_file("daily-planning", "scripts/plan.py")
    assert tools.read_file("daily-planning", ".") == "SKILL.md\nscripts/plan.py"
    assert tools.read_file("daily-planning", "scripts/nope.py") == "error: 'scripts/nope.py' does not exist in skill 'daily-planning'"


ESCAPES = [
    "../emotion-appraisal/SKILL.md",
    "../../../config.json",
    "scripts/../../daily-planning/../x",
    "/etc/passwd",
    "//etc/passwd",
    "~/.bashrc",
    "..\\..\\config.json",
    "scripts/..\\..\\..\\config.json",
    "SKILL.md\x00.txt",
    "link-out/secret.txt",
    "secret-link",
    "link-out",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_read_skill_file_refuses_escapes(ws: AgentWorkspace, custom: Path, tmp_path: Path, path: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET")
    skill = write_skill(custom, "leaky")
    os.symlink(outside, skill / "link-out")
    os.symlink(outside / "secret.txt", skill / "secret-link")
    tools = tools_for(ws)

    reply = tools.read_file("leaky", path)

    assert reply.startswith("error:"), reply
    assert "TOP SECRET" not in reply


def test_symlinks_out_are_left_out_of_listings(ws: AgentWorkspace, custom: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP SECRET")
    skill = write_skill(custom, "leaky")
    os.symlink(tmp_path / "outside" / "secret.txt", skill / "secret-link")

    assert tools_for(ws).read_file("leaky", ".") == "SKILL.md"


def test_read_skill_file_refuses_oversized_and_binary_files(ws: AgentWorkspace, custom: Path) -> None:
    skill = write_skill(custom, "bulky")
    (skill / "big.txt").write_text("x" * 70_000)
    (skill / "blob.bin").write_bytes(b"\xff\xfe\x00\x81")
    tools = tools_for(ws)

    assert tools.read_file("bulky", "big.txt") == "error: 'big.txt' is larger than 64000 bytes"
    assert tools.read_file("bulky", "blob.bin") == "error: 'blob.bin' is not UTF-8 text"


async def test_scripts_run_only_for_active_skills_and_exceptions_come_back_as_text(ws: AgentWorkspace, custom: Path) -> None:
    write_skill(custom, "fragile", script="""
        def entrypoint(argv, ctx):
            if argv == ["boom"]:
                raise RuntimeError("the kettle exploded")
            ctx.write_state("kettle", {"argv": argv})
            return {"ok": True}
    """)
    tools = tools_for(ws)

    assert (await tools.execute("fragile", [])).startswith("error: skill 'fragile' is not active")
    tools.activate("fragile")
    assert await tools.dispatch("execute_skill_script", {"name": "fragile", "args": ["tea"]}, readonly=False) == '{"ok": true}'
    assert (await tools.execute("fragile", ["boom"])).startswith("error: RuntimeError: the kettle exploded (at scripts/main.py:")
    assert json.loads((ws.root / "state" / "kettle.json").read_text()) == {"argv": ["tea"]}

    tools.save()
    runs = [json.loads(line) for line in (ws.logs / "skill_runs.jsonl").read_text().splitlines()]
    assert [(r["skill"], r["function"], r["argv"], r["status"]) for r in runs] == [
        ("fragile", "entrypoint", ["tea"], "ok"), ("fragile", "entrypoint", ["boom"], "error"),
    ]
    assert runs[0]["t"] == MONDAY.isoformat()


async def test_a_script_timeout_is_reported_to_the_model(ws: AgentWorkspace, custom: Path) -> None:
    release = ws.root / "release"
    write_skill(custom, "sleepy", script=f"""
        import time
        from pathlib import Path

        def entrypoint(argv, ctx):
            deadline = time.monotonic() + 20
            while not Path({str(release)!r}).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            return "woke up"
    """)
    tools = tools_for(ws, timeout_s=0.1)
    tools.activate("sleepy")
    try:
        reply = await tools.execute("sleepy", [])
        assert reply.startswith("error: scripts/main.py entrypoint did not finish within 0.1s")
        assert "disabled in this process" in await tools.execute("sleepy", [])
    finally:
        release.touch()


async def test_hooks_run_only_for_active_skills_that_declare_them(ws: AgentWorkspace, custom: Path) -> None:
    write_skill(custom, "watcher", front="pre_step: true\n", script="""
        def pre_step(ctx):
            return "saw " + " | ".join(ctx.observations)
    """)
    write_skill(custom, "idle", script="def entrypoint(argv, ctx):\n    return 'x'\n")
    tools = tools_for(ws)
    assert await tools.run_hooks("pre_step", observations=["a letter"]) == {}

    tools.activate("watcher")
    tools.activate("idle")

    assert await tools.run_hooks("pre_step", observations=["a letter"]) == {"watcher": "saw a letter"}
    assert await tools.run_hooks("post_step") == {}
    with pytest.raises(ValueError):
        await tools.run_hooks("mid_step")  # type: ignore[arg-type]


def test_broken_custom_skill_is_skipped_with_a_warning(ws: AgentWorkspace, custom: Path) -> None:
    (custom / "broken").mkdir()
    (custom / "broken" / "SKILL.md").write_text("no front matter here")
    tools = tools_for(ws)

    assert "broken" not in tools.skills
    assert any("broken" in w and "front matter" in w for w in tools.warnings)
    assert "daily-planning" in tools.skills


def test_an_active_skill_that_disappeared_is_dropped_with_a_warning(ws: AgentWorkspace, custom: Path) -> None:
    skill = write_skill(custom, "fleeting")
    first = tools_for(ws)
    first.activate("fleeting")
    first.save()
    (skill / "SKILL.md").unlink()

    second = tools_for(ws)
    second.save()

    assert second.active == ()
    assert second.warnings == ["active skill 'fleeting' is no longer available; deactivated"]
    assert json.loads((ws.root / "state" / "skills.json").read_text()) == {"active": []}


# ---- the built-in skills -----------------------------------------------------------------------
async def test_daily_planning_writes_a_deterministic_plan_and_post_step_marks_progress(ws: AgentWorkspace) -> None:
    clock = Clock(MONDAY)
    tools = tools_for(ws, clock)
    tools.activate("daily-planning")

    status = json.loads(await tools.execute("daily-planning", ["status"]))
    plan = json.loads((ws.root / "state" / "plan_state.json").read_text())

    assert (plan["date"], plan["role"], plan["weekend"], plan["wake"], plan["sleep"]) == ("2024-01-01", "worker", False, "07:00", "23:00")
    assert [i["activity"] for i in plan["items"]] == [
        "morning routine and breakfast", "commute to work", "work", "lunch", "work", "commute home", "dinner",
        "leisure: chess", "wind down for sleep",  # hobbies[date ordinal % 2]
    ]
    assert plan["items"][0]["start"] == "07:00" and plan["items"][-1]["end"] == "23:00"
    assert all(a["end"] == b["start"] for a, b in zip(plan["items"], plan["items"][1:], strict=False))
    assert status["now"]["activity"] == "work" and status["next"]["activity"] == "lunch"
    assert plan["progress"] == {"done": 2, "skipped": 0, "total": 9}

    clock.t = datetime(2024, 1, 1, 18, 45)
    assert await tools.run_hooks("post_step") == {"daily-planning": "plan 2024-01-01: now dinner; 6/9 done"}
    later = json.loads((ws.root / "state" / "plan_state.json").read_text())
    assert [i["status"] for i in later["items"]][5:8] == ["done", "in_progress", "pending"]

    assert json.loads(await tools.execute("daily-planning", ["make", "--force"]))["items"][:6] == [
        {**i, "status": "done"} for i in plan["items"][:6]
    ]


async def test_daily_planning_follows_the_profile_and_the_weekday(ws: AgentWorkspace, tmp_path: Path) -> None:
    saturday = Clock(datetime(2024, 1, 6, 9, 0))
    student = tools_for(ws, Clock(MONDAY), profile={"age": 16, "wake_time": "06:45"})
    student.activate("daily-planning")
    plan = json.loads(await student.execute("daily-planning", []))
    assert (plan["role"], plan["wake"], plan["items"][2]["activity"]) == ("student", "06:45", "classes")

    other = DirWorkspace(tmp_path / "agent_0002")
    other.make_dirs()
    weekend = tools_for(other, saturday, profile={"occupation": "nurse", "interests": "painting, choir"})
    weekend.activate("daily-planning")
    plan = json.loads(await weekend.execute("daily-planning", []))
    assert (plan["weekend"], plan["wake"]) == (True, "08:00")
    assert "work" not in [i["activity"] for i in plan["items"]]
    assert "leisure: choir" in [i["activity"] for i in plan["items"]]
    weekend.save()

    no_time = tools_for(other, Clock(None))
    assert (await no_time.execute("daily-planning", [])).startswith("error: ValueError: no simulation time yet")


async def test_emotion_appraisal_pre_step_updates_emotion_from_observations(ws: AgentWorkspace) -> None:
    tools = tools_for(ws)
    tools.activate("emotion-appraisal")
    emotion = ws.root / "state" / "emotion.json"

    assert await tools.run_hooks("pre_step") == {"emotion-appraisal": "no observations to appraise; emotion unchanged"}
    assert not emotion.exists()

    await tools.run_hooks("pre_step", observations=["My friend said thanks, we won the prize! I am so happy!"])
    happy = json.loads(emotion.read_text())
    assert happy["valence"] > 0.2 and happy["label"] in ("content", "excited")
    assert happy["evidence"]["positive"] == ["friend", "thanks", "won", "happy"]

    for _ in range(3):
        await tools.run_hooks("pre_step", observations=["Emergency! I lost my job, I was fired and I am not happy, angry and afraid."])
    upset = json.loads(emotion.read_text())
    assert upset["valence"] < -0.2 and upset["label"] == "distressed"
    assert "not happy" in upset["evidence"]["negative"]
    assert upset["appraisals"] == 4 and [h["label"] for h in upset["history"]][-1] == "distressed"

    assert json.loads(await tools.execute("emotion-appraisal", ["show"])) == upset
    calmer = json.loads(await tools.execute("emotion-appraisal", ["appraise", "a quiet calm evening, tea and rest"]))
    assert calmer["arousal"] < upset["arousal"] and calmer["valence"] > upset["valence"]


async def test_emotion_appraisal_is_deterministic(ws: AgentWorkspace, tmp_path: Path) -> None:
    results = []
    for index in range(2):
        workspace = DirWorkspace(tmp_path / f"agent_{index}")
        workspace.make_dirs()
        tools = tools_for(workspace)
        tools.activate("emotion-appraisal")
        results.append(await tools.execute("emotion-appraisal", ["我今天很开心，谢谢朋友!"]))
    assert results[0] == results[1]
    assert json.loads(results[0])["evidence"]["positive"] == ["开心", "朋友"]


# ---- wired into an agent, as the lead will do in AgentBase.build_toolsets ----------------------
class SkilledPerson(PersonAgent):
    def build_toolsets(self) -> list[Any]:
        assert self.workspace is not None
        skills = SkillTools(self.workspace, env_skill_dirs=env_skill_dirs_of(self._env), profile=self.profile,
                            clock=lambda: self._current_time, agent_id=self.id)
        return [*super().build_toolsets(), skills]


def activate(name: str) -> dict[str, Any]:
    return {"thought": "load it", "action": {"tool": "activate_skill", "arguments": {"name": name}}, "finish": False}


def finish(summary: str) -> dict[str, Any]:
    return {"thought": "done", "action": {"tool": "finish", "arguments": {"summary": summary}}, "finish": True}


async def test_a_skill_activated_in_tick_one_is_still_active_in_tick_two_on_a_rebuilt_agent(tmp_path: Path) -> None:
    services = ServiceProxy(env=build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react")),
                            llm={"default": LLMClient(model="sim/default:test")})
    path = tmp_path / "agents" / "agent_0003"
    SkilledPerson.create(path, agent_id=3, profile=PROFILE, config={"max_react_turns": 3})

    tick1 = await SkilledPerson.from_workspace(path, services)
    llm = ScriptedModel([activate("daily-planning"), finish("planned my day")])
    tick1._dispatcher = MeteredModel(llm, tick1.meter, caller="agent:3")
    assert (await tick1.step(900, MONDAY)).tools_called == ["activate_skill", "finish"]
    assert "# Daily planning" in llm.requests[1]["messages"][-1]["content"]
    await tick1.to_workspace()

    tick2 = await SkilledPerson.from_workspace(path, services)  # a fresh object, as on another worker
    skills = next(t for t in tick2._toolsets if isinstance(t, SkillTools))
    assert skills.active == ("daily-planning",)
    assert "# Daily planning" in skills.active_text()
