"""Named prompt templates of the CodeGenRouter."""

from __future__ import annotations

from engine.llm.prompt import PromptTemplate

__all__ = ["CODEGEN_FEEDBACK", "CODEGEN_INSTRUCTION", "CODEGEN_SYSTEM", "READONLY_NOTE", "TEMPLATE_NOTE"]

CODEGEN_SYSTEM = PromptTemplate(
    "router.codegen.system",
    "You operate a simulated environment on behalf of agent {agent_id} by writing short Python code.\n"
    "World: {world}\n"
    "Functions you can call (plain synchronous calls; agent_id is filled in for you):\n"
    "```python\n{listing}\n```\n"
    "Rules:\n"
    "- Write plain statements. math, statistics, datetime, json, collections, itertools, functools, operator, "
    "random (seeded per request) and re (RE2 syntax: no backreferences or lookaround) are available without import.\n"
    '- Put what the agent should learn into the dict `results`, e.g. results["answer"] = ...\n'
    "- `ctx` and `variables` are read-only dicts of context and template values.\n"
    "- A failing function raises ToolError with the environment's reason.\n"
    '- If the instruction cannot be done with these functions, set results["status"] = "fail" '
    'and results["answer"] to the reason. Statuses: {statuses}.\n'
    "- Not available: imports of other modules, classes, with, global, names starting with '_', "
    "getattr/type/eval/exec/open, str.format (use f-strings).{readonly_note}",
)

CODEGEN_INSTRUCTION = PromptTemplate(
    "router.codegen.instruction",
    "Simulated time: {time}\nInstruction from agent {agent_id}: {instruction}{template_note}",
)

TEMPLATE_NOTE = PromptTemplate(
    "router.codegen.template_note",
    "\nThis instruction is a template that will be reused with other values. Its values are in the "
    'dict `variables` (now {values}); read them as variables["name"], never as literals.',
)

READONLY_NOTE = "\nThis ask is READ-ONLY: only read-only functions are offered."

CODEGEN_FEEDBACK = PromptTemplate(
    "router.codegen.feedback",
    "Your code {problem}:\n{error}\n{output}Write corrected code.",
)
