"""The replay datasets the society and agent batches write; each begins with ``run``, the run id of the
driver that wrote the row."""

from __future__ import annotations

from engine.network.datasets import NETWORK_EDGES
from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["ACTIONS", "AGENT_MEMORY", "AGENT_PROFILES", "CALIBRATION", "CALL_ID", "NETWORK_EDGES", "LLM_CALLS", "QUESTIONNAIRE_ANSWERS", "SOCIETY_QUERIES",
           "SURVEY_ANSWERS", "TRANSCRIPTS"]

#: How a call id is made (see :func:`engine.society.transcripts.call_rows`).
CALL_ID = ("<step>/<scope>/<caller>[@agent:<id>]/<n>: scope is tick, q<index>, ask-<index> or intervene-<index>; "
           "n counts that caller's calls for that agent in the scope")

ACTIONS = DatasetSchema(
    name="actions",
    kind="agent",
    description="one row per agent per step: what the agent did and what it cost",
    columns=(
        RUN_COLUMN,
        Column(name="agent_id", type="int64", description="the agent"),
        Column(name="agent_type", type="string", description="registered agent type"),
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="status", type="string", description="finished | turn_limit | llm_error | error"),
        Column(name="tools_called", type="list<string>", description="tools the agent called, in order"),
        Column(name="summary", type="string", description="the agent's own summary of the step (null if none)"),
        Column(name="turns", type="int64", description="ReAct turns used"),
        Column(name="env_calls", type="int64", description="environment requests (observe + ask_env)"),
        Column(name="llm_calls", type="int64", description="LLM calls made by the agent"),
        Column(name="llm_failures", type="int64", description="LLM calls that failed"),
        Column(name="input_tokens", type="int64", description="prompt tokens"),
        Column(name="output_tokens", type="int64", description="completion tokens"),
        Column(name="llm_latency_ms", type="float64", description="summed LLM latency"),
        Column(name="cost_usd", type="float64", description="provider cost of the step's calls where the price is known"),
        Column(name="duration_ms", type="float64", description="wall-clock time of the agent-step"),
        Column(name="error", type="string", description="error text when status is llm_error or error"),
        Column(name="tier", type="string", description="the member's fidelity tier: llm | archetype | rule"),
        Column(name="call_id", type="string",
               description="archetype members: the llm_calls row of their group's decision (null for the other tiers)"),
        Column(name="group_id", type="string", description="archetype members: their group, <population>.<n>"),
    ),
)

LLM_CALLS = DatasetSchema(
    name="llm_calls",
    kind="llm",
    description="one row per LLM call",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="call_id", type="string", description=f"the call, unique in the run and the same in a seeded re-run: {CALL_ID}"),
        Column(name="caller", type="string", description="agent:<id> or router"),
        Column(name="agent_id", type="int64",
               description="the agent whose step or ask the call served (the router's calls included); null for the helper"),
        Column(name="role", type="string", description="client role"),
        Column(name="prompt_name", type="string", description="prompt template name"),
        Column(name="prompt_hash", type="string", description="prompt template hash"),
        Column(name="model", type="string", description="the model requested (the client's model string)"),
        Column(name="served_model", type="string",
               description="the model id the provider's reply named (a cached call: as the cache stored it; null: none sent)"),
        Column(name="system_fingerprint", type="string", description="the provider's system_fingerprint (null: none sent)"),
        Column(name="input_tokens", type="int64", description="prompt tokens"),
        Column(name="output_tokens", type="int64", description="completion tokens"),
        Column(name="latency_ms", type="float64", description="call latency"),
        Column(name="attempt", type="int64", description="structured-output attempt (1 = first answer)"),
        Column(name="cached", type="bool", description="served from the response cache, no provider call"),
        Column(name="cost_usd", type="float64", description="provider cost where the price is known"),
        Column(name="status", type="string", description="ok | error"),
        Column(name="error", type="string", description="error text"),
        Column(name="prompt_chars", type="int64", description="characters of the messages sent (4 make a simulated LLM token)"),
        Column(name="prefix_chars", type="int64",
               description="of which the leading messages repeat the caller's previous prompt (what a prefix cache reuses, "
               "at least); null where untracked (the router's calls, an agent's first call)"),
    ),
)

TRANSCRIPTS = DatasetSchema(
    name="transcripts",
    kind="llm",
    description="one row per llm_calls row (join on call_id): the messages sent, the reply and the parsed decision; "
    "past the run's transcripts.max_bytes a row keeps its metadata and drops its text (text_dropped)",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="call_id", type="string", description="the llm_calls row of this call"),
        Column(name="caller", type="string", description="agent:<id>, router or helper"),
        Column(name="agent_id", type="int64", description="the agent whose step or ask the call served"),
        Column(name="role", type="string", description="client role"),
        Column(name="prompt_name", type="string", description="prompt template name"),
        Column(name="status", type="string", description="ok | error"),
        Column(name="messages", type="json", description="the messages sent (system, user, tool results), as JSON"),
        Column(name="reply", type="string", description="the reply's text"),
        Column(name="thought", type="string", description="the decision's thought (null unless the reply is a decision)"),
        Column(name="tool", type="string", description="the tool the decision calls"),
        Column(name="arguments", type="json", description="the decision's tool arguments, as JSON"),
        Column(name="error", type="string", description="error text"),
        Column(name="text_bytes", type="int64", description="bytes of the call's text, kept or not: messages as stored JSON, reply in UTF-8"),
        Column(name="text_dropped", type="bool", description="the text was dropped: the run's transcript cap was reached"),
    ),
)

AGENT_MEMORY = DatasetSchema(
    name="agent_memory",
    kind="agent",
    description="one row per agent per step (with its actions row): the agent's memory as of the end of the step",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="agent_id", type="int64", description="the agent"),
        Column(name="memory", type="string", description="AGENT_MEMORY.md (null: none yet)"),
        Column(name="todo", type="json", description="the TODO list (state/todo.json; null: none)"),
        Column(name="episodes", type="json", description="the episodes the step added (memory/episodes.jsonl), as a JSON list"),
    ),
)

SOCIETY_QUERIES = DatasetSchema(
    name="society_queries",
    kind="society",
    description="one row per ask / intervene step: the question or instruction, the plan executed and the answer",
    columns=(
        RUN_COLUMN,
        Column(name="step_index", type="int64", description="the spec's top-level step (0-based)"),
        Column(name="step", type="int64", description="society steps (ticks) completed before it"),
        Column(name="as_of_step", type="int64",
               description="an as_of_step ask: the kept tick whose agents and env it read; null otherwise"),
        Column(name="t", type="timestamp", description="simulated time when it ran (tick as_of_step's when set)"),
        Column(name="kind", type="string", description="ask | intervene"),
        Column(name="text", type="string", description="the question or instruction"),
        Column(name="status", type="string", description="ok | failed"),
        Column(name="answer", type="string", description="the helper's final answer or report"),
        Column(name="replans", type="int64", description="replans used"),
        Column(name="steps_json", type="json", description="executed plan steps: tool, args, result, ok"),
        Column(name="error", type="string", description="why it failed"),
    ),
)

QUESTIONNAIRE_ANSWERS = DatasetSchema(
    name="questionnaire_answers",
    kind="questionnaire",
    description="one row per agent per question of a questionnaire step; value columns are null unless parse_success",
    columns=(
        RUN_COLUMN,
        Column(name="questionnaire_id", type="string", description="the questionnaire"),
        Column(name="step_index", type="int64", description="the spec step that asked it, 0-based"),
        Column(name="step", type="int64", description="society steps (ticks) done when it was asked"),
        Column(name="as_of_step", type="int64",
               description="the kept tick whose agents answered (an as_of_step questionnaire); null: the agents as they were"),
        Column(name="t", type="timestamp", description="simulated time the agents answered in (tick as_of_step's when set)"),
        Column(name="agent_id", type="int64", description="the agent answering"),
        Column(name="question_id", type="string", description="the question"),
        Column(name="response_type", type="string", description="text | integer | float | choice | json"),
        Column(name="raw_text", type="string", description="the model's raw answer (the whole reply if it had none for this question)"),
        Column(name="value_json", type="json", description="the validated value as JSON text"),
        Column(name="value_int", type="int64", description="the value of an integer question"),
        Column(name="value_float", type="float64", description="the value of a float question"),
        Column(name="value_text", type="string", description="the value of a text or choice question"),
        Column(name="reason", type="string", description="the agent's reason for its answer"),
        Column(name="parse_success", type="bool", description="a valid typed value was given"),
        Column(name="error", type="string", description="why no valid value was recorded"),
        Column(name="attempts", type="int64", description="structured-output attempts made (0: never asked)"),
    ),
)

AGENT_PROFILES = DatasetSchema(
    name="agent_profiles",
    kind="agent",
    description="one row per agent: its profile as its prompts show it, and for a survey's members the respondent",
    columns=(
        RUN_COLUMN,
        Column(name="agent_id", type="int64", description="the agent"),
        Column(name="agent_type", type="string", description="registered agent type"),
        Column(name="population", type="int64", description="the spec's population it was made from (null: listed in agents)"),
        Column(name="respondent_id", type="string", description="a survey member's respondent: the id column, else the row number"),
        Column(name="weight", type="float64", description="a survey member's weight (1 without a weight column)"),
        Column(name="profile", type="json", description="the profile fields, as the agent's prompts show them"),
    ),
)

SURVEY_ANSWERS = DatasetSchema(
    name="survey_answers",
    kind="survey",
    description="one row per survey member per target item: the respondent's real answer (never shown to the agent)",
    columns=(
        RUN_COLUMN,
        Column(name="agent_id", type="int64", description="the agent standing for the respondent"),
        Column(name="respondent_id", type="string", description="the respondent"),
        Column(name="item", type="string", description="the target item: the question id a from_survey questionnaire asks"),
        Column(name="label", type="string", description="the real answer's label (null: no answer, or a missing code)"),
        Column(name="position", type="int64", description="its 0-based place among the item's labels, in scale order"),
        Column(name="code", type="string", description="the code as the data holds it"),
        Column(name="retest_label", type="string", description="the answer to the same item asked again, where the data has it"),
        Column(name="weight", type="float64", description="the respondent's weight"),
    ),
)

CALIBRATION = DatasetSchema(
    name="calibration",
    kind="survey",
    description="a calibrated survey population's fit: one row per raked category, with the fit's summary repeated",
    columns=(
        RUN_COLUMN,
        Column(name="population", type="int64", description="the spec's population"),
        Column(name="variable", type="string", description="the persona field raked"),
        Column(name="category", type="string", description="its label"),
        Column(name="target", type="float64", description="the share it should have"),
        Column(name="before", type="float64", description="its share under the survey's own weights"),
        Column(name="after", type="float64", description="its share under the raked weights, or, after mode draw, among the members drawn"),
        Column(name="max_error", type="float64", description="the largest |after - target| of the population"),
        Column(name="design_effect", type="float64", description="Kish's design effect of the raked weights, or after a draw Kish's over the rows drawn, "
                                                                       "each weighted by the times it was drawn"),
        Column(name="effective_n", type="float64", description="the effective sample size they leave"),
        Column(name="respondents", type="int64", description="the rows raked (the pool, for a draw)"),
        Column(name="iterations", type="int64", description="raking rounds run"),
        Column(name="converged", type="bool", description="every margin came within the tolerance; after a draw: the draw hits every "
                                                              "target on average"),
    ),
)
