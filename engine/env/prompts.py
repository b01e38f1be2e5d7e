"""Named prompt templates of the environment: the routers' ReAct turns and the world description."""

from __future__ import annotations

from engine.llm.prompt import PromptTemplate

__all__ = ["REACT_INSTRUCTION", "REACT_SYSTEM", "WORLD_DESCRIPTION"]

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

WORLD_DESCRIPTION = PromptTemplate(
    "env.world_description",
    "Agents of a simulated society act in an environment made of these modules and tools:\n{listing}\n"
    "Write a short description of this world for the agents who live in it: at most three sentences, "
    "plain prose, second person, saying what exists and what they can do. Do not list function names "
    "or arguments, and do not invent places, people or numbers the listing does not give.",
)
