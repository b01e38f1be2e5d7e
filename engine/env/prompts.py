"""Named prompt templates of the environment routers."""

from __future__ import annotations

from engine.llm.prompt import PromptTemplate

__all__ = ["REACT_INSTRUCTION", "REACT_SYSTEM"]

REACT_SYSTEM = PromptTemplate(
    "router.react.system",
    "You operate a simulated environment on behalf of agent {agent_id}.\n"
    "World: {world}\n"
    "Available tools (agent_id is filled in for you):\n{tools}\n"
    "Each turn, choose ONE action: a tool call, or final_answer when the instruction is handled "
    "or cannot be handled. Set done=true when no further call is needed after this one."
    "{readonly_note}",
)

REACT_INSTRUCTION = PromptTemplate(
    "router.react.instruction",
    "Simulated time: {time}\nInstruction from agent {agent_id}: {instruction}\n{history}",
)
