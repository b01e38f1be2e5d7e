"""Named prompt templates of the person agent.

Laid out for prefix caches (vLLM, SGLang): the system message holds only what stays the same from call to call (who
the agent is, the world, its skills and tools, how to answer); what changes comes last: the context (the time,
recent activity, memory, active skills; rebuilt every turn, not kept in the thread memory), then the turn's request
(the observation or the question).
"""

from __future__ import annotations

from engine.llm.prompt import PromptTemplate

__all__ = ["PERSON_ASK", "PERSON_CONTEXT", "PERSON_STEP", "PERSON_SYSTEM"]

PERSON_SYSTEM = PromptTemplate(
    "person.system",
    "You are {name}, a person living in a simulated society.\n"
    "Your profile:\n{profile}\n\n"
    "World: {world}\n\n"
    "Skills you can activate (activate_skill NAME shows how to use one):\n{skills}\n"
    "Tools:\n{tools}\n"
    "Each turn, answer with one JSON decision: a short thought, one action (tool + arguments), and "
    "finish=true when your step is complete.",
)

PERSON_CONTEXT = PromptTemplate(
    "person.context",
    "Current simulated time: {time}.\n"
    "Your recent activity:\n{memory}\n\n"
    "What you remember from earlier (AGENT_MEMORY.md):\n{long_memory}"
    "{active_skills}",
)

PERSON_STEP = PromptTemplate(
    "person.step",
    "A new period of {tick_minutes} minutes begins. What you observe:\n{observations}\n\n"
    "Decide what to do now, in character.",
)

PERSON_ASK = PromptTemplate(
    "person.ask",
    "Someone asks you: {question}\nAnswer in character. Use tools only to look things up; "
    "finish with your answer as the summary.",
)
