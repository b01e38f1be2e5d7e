"""GlobalInformationEnv: the reference's get and set (as set_info) over GlobalInformationSpace."""

from __future__ import annotations

from datetime import datetime, timedelta

from engine.env.base import EXPERIMENTER_ID
from engine.env.modules.global_info import GlobalInformationSpace
from engine.env.modules.reference_global_info import GlobalInformationEnv
from engine.env.registry import env_module_names, resolve_env_module
from engine.env.sandbox.namespace import safe_builtins
from engine.env.sandbox.offered import MODULE_MEMBERS
from engine.env.testing import ToolCall, check_update_discipline

T0 = datetime(2024, 1, 1, 8, 0)
T1, T2 = T0 + timedelta(hours=1), T0 + timedelta(hours=2)


async def _env(**kwargs) -> GlobalInformationEnv:
    env = GlobalInformationEnv(**kwargs)
    await env.init(T0)
    env.bind_agents([1, 2, 3])
    return env


async def test_get_shows_the_initial_information_and_nothing_without_it() -> None:
    env = await _env(global_information="The dam holds.", facts=["older news"])
    assert await env.call_tool("get", {"agent_id": 2}, readonly=True) == (
        "Current global information:\n- [2024-01-01 08:00, from world] The dam holds.")
    empty = await _env()
    assert await empty.call_tool("get", {"agent_id": 2}, readonly=True) == "There is no global information yet."


async def test_set_info_replaces_it_from_the_step_and_the_last_applied_wins() -> None:
    env = await _env(global_information="The dam holds.")
    assert await env.call_tool("set_info", {"agent_id": 3, "text": "Evacuate the valley."}) == (
        "global information queued; everyone reads it from the next step")
    await env.call_tool("set_info", {"agent_id": 1, "text": "  The dam is cracking.  "})
    assert "The dam holds." in await env.call_tool("get", {"agent_id": 1}, readonly=True)  # unchanged within the step
    await env.step(3600, T1)
    assert await env.call_tool("get", {"agent_id": 1}, readonly=True) == (
        "Current global information:\n- [2024-01-01 09:00, from agent 3] Evacuate the valley.")
    assert (await env.call_tool("latest_news", {"agent_id": 1}, readonly=True)).startswith("Latest news (3 of 3)")
    await env.call_tool("set_info", {"agent_id": EXPERIMENTER_ID, "text": "All clear."})
    restored = GlobalInformationEnv()
    restored.load_snapshot(env.dump_snapshot())
    await restored.step(3600, T2)
    assert await restored.call_tool("get", {"agent_id": 1}, readonly=True) == (
        "Current global information:\n- [2024-01-01 10:00, from the experimenter] All clear.")


async def test_global_information_env_keeps_the_update_discipline() -> None:
    await check_update_discipline(lambda: GlobalInformationEnv(global_information="calm"), [
        ToolCall(2, "set_info", {"text": "storm"}),
        ToolCall(1, "set_info", {"text": "   "}),  # refused: empty
        ToolCall(EXPERIMENTER_ID, "set_info", {"text": "sirens at noon"}),
        ToolCall(9, "set_info", {"text": "refused: no such agent"}),
        ToolCall(1, "get"),
    ], agent_ids=[1, 2, 3])


def test_global_information_env_has_get_and_set_info_beside_the_space_tools() -> None:
    assert set(GlobalInformationEnv.tools()) == set(GlobalInformationSpace.tools()) | {"get", "set_info"}
    assert GlobalInformationEnv.tools()["get"].kind == "observe" and GlobalInformationEnv.tools()["get"].readonly
    assert resolve_env_module("GlobalInformationEnv") is GlobalInformationEnv


def test_no_builtin_module_tool_shadows_a_name_generated_code_uses() -> None:
    # The code-generating router binds tools as globals of the code it runs: a tool named ``set`` would hide the builtin.
    reserved = set(safe_builtins(print)) | set(MODULE_MEMBERS) | {"results", "ctx", "variables"}
    clashes = {(name, t) for name in env_module_names() for t in resolve_env_module(name).tools() if t in reserved}
    assert clashes == set()
