"""Named prompt templates of the ask/intervene helper (plan, replan, final answer)."""

from __future__ import annotations

from engine.llm.prompt import PromptTemplate

__all__ = [
    "ANSWER_GOALS",
    "HELPER_ANSWER",
    "HELPER_PLAN",
    "HELPER_REPLAN",
    "HELPER_SYSTEM",
    "LABELS",
    "MODE_NOTES",
    "STEP_LIMIT_NOTE",
]

HELPER_SYSTEM = PromptTemplate(
    "helper.system",
    "You are the experimenter's assistant for a simulated society of {agent_count} agents.\n"
    "Current simulated time: {time}.\n"
    "{mode_note}\n"
    "Tools:\n{tools}\n"
    "Write a plan of at most {max_steps} steps. Each step calls one tool with its arguments and says what "
    "it does (description) and what it should produce (expected_output). Steps are numbered in execution "
    "order and cannot read each other's results, with one exception: a tool that takes agent ids also "
    "accepts from_step=N instead, meaning the agent_ids that step N produced (filter_agents, list_agents). "
    "If a step fails you will be asked for a new plan and shown every result so far.",
)

MODE_NOTES = {
    "ask": "You answer a QUESTION about the simulation. Only read-only tools are offered: nothing may change.",
    "intervene": "You carry out an INTERVENTION: change the environment or message agents as instructed, "
    "checking first with read-only tools where that helps.",
}

LABELS = {"ask": "Question", "intervene": "Instruction"}

HELPER_PLAN = PromptTemplate(
    "helper.plan",
    "{label}: {text}\nThe first step of this plan is step {first}.",
)

HELPER_REPLAN = PromptTemplate(
    "helper.replan",
    "Steps executed so far:\n{history}\n"
    "Step {failed} failed: {error}\n"
    "Write a new plan for what remains (do not repeat the steps that succeeded; use their results). "
    "The first step of the new plan is step {first}.",
)

HELPER_ANSWER = PromptTemplate(
    "helper.answer",
    "{label}: {text}\n\n"
    "These tool calls were made, with their real results:\n{results}\n\n"
    "{note}{goal} If the results do not settle it, say what is missing. Do not invent agents, numbers "
    "or events.",
)

ANSWER_GOALS = {
    "ask": "Answer the question using only these results.",
    "intervene": "Report what was changed or sent and what was not, using only these results.",
}

STEP_LIMIT_NOTE = PromptTemplate(
    "helper.answer.step_limit",
    "Not every planned step ran: the limit of {max_steps} steps was reached.\n",
)
