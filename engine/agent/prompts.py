"""Named prompt templates of the person agent.

Laid out for prefix caches (vLLM, SGLang): the system message holds only what stays the same from call to call (who
the agent is, the world, its skills and tools, how to answer); what changes (the time, recent activity, memory,
active skills, the observation or the question) comes last, in the user message.
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
    "What you remember from earlier (AGENT_MEMORY.md):\n{long_memory}\n\n"
    "{active_skills}",
)

PERSON_STEP = PromptTemplate(
    "person.step",
    "{context}A new period of {tick_minutes} minutes begins. What you observe:\n{observations}\n\n"
    "Decide what to do now, in character.",
)

PERSON_ASK = PromptTemplate(
    "person.ask",
    "{context}Someone asks you: {question}\nAnswer in character. Use tools only to look things up; "
    "finish with your answer as the summary.",
)
