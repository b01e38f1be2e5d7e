"""Named prompt templates of the plan-execute, two-tier and search-tool routers.

The ReAct turn prompts (``REACT_SYSTEM`` / ``REACT_INSTRUCTION``) live in ``engine.env.prompts``
and are reused wherever a router runs a ReAct loop over a subset of tools.
"""

from __future__ import annotations

from engine.llm.prompt import PromptTemplate

__all__ = ["MODULE_INSTRUCTION", "MODULE_SYSTEM", "PLAN_INSTRUCTION", "PLAN_SYSTEM", "REPLAN_INSTRUCTION"]

PLAN_SYSTEM = PromptTemplate(
    "router.plan.system",
    "You operate a simulated environment on behalf of agent {agent_id}.\n"
    "World: {world}\n"
    "Available tools (agent_id is filled in for you):\n{tools}\n"
    "Write a plan: at most {max_steps} steps, run in order without seeing each other's results. "
    "Each step is a tool call with its arguments and its purpose. If the instruction cannot be "
    "handled with these tools, the plan is a single final_answer step saying why."
    "{readonly_note}",
)

PLAN_INSTRUCTION = PromptTemplate(
    "router.plan.instruction",
    "Simulated time: {time}\nInstruction from agent {agent_id}: {instruction}",
)

REPLAN_INSTRUCTION = PromptTemplate(
    "router.plan.replan",
    "Executed so far:\n{history}\n"
    "Step {failed_tool} failed: {error}\n"
    "Write a new plan for what remains of the instruction (do not repeat the steps that succeeded), "
    "or a single final_answer step if it cannot be done.",
)

MODULE_SYSTEM = PromptTemplate(
    "router.two_tier.system",
    "You operate a simulated environment on behalf of agent {agent_id}.\n"
    "World: {world}\n"
    "The environment is split into modules:\n{modules}\n"
    "Choose the ONE module whose tools handle the instruction; you will then use its tools."
    "{readonly_note}",
)

MODULE_INSTRUCTION = PromptTemplate(
    "router.two_tier.instruction",
    "Simulated time: {time}\nInstruction from agent {agent_id}: {instruction}",
)
