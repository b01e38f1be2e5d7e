"""How much of each LLM agent's prompt repeats the start of its previous prompt (what a server's prefix cache can
reuse), and how prompts grow over ticks, on the social simulated LLM.

Runs --agents PersonAgents (default 40) for --ticks ticks (default 6) in this process with SocialMediaSpace and prints,
per tick, from ``llm_calls`` (the agents' own calls):
    tick <n>: calls <n>; prompt tokens p50 <n> p95 <n>; reusable prefix <share> of all prompt characters,
    <share> on a step's first call (against the previous tick's last prompt)
Shares are of characters (the simulated LLM counts 4 characters a token), by whole leading messages
(:mod:`engine.llm.prefix`): a lower bound on what a prefix cache reuses.

2026-12-06, 2 cores, 40 agents x 6 ticks: reusable prefix in ticks 2-6, 0.00 of all prompt characters before the
prompt layout put the fixed parts first (the time and recent memory sat in the system message), 0.56 after.
With --ticks 50 --budget 1500: prompt p95 1,476 tokens at tick 5, 1,466 at tick 50 (0.99x); without a budget p95
grows about 400 tokens a tick (2,279 at tick 5 of 6).

Usage: python benchmarks/prompt_prefix.py [--agents 40] [--ticks 6] [--budget TOKENS]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs, when run as a script

from rundirs import positive  # noqa: E402

from engine.society.run.runner import run_experiment  # noqa: E402
from engine.society.shells import InProcessShell  # noqa: E402
from engine.spec import parse_spec  # noqa: E402
from engine.storage.reader import ReplayReader  # noqa: E402

PER_TICK = """
WITH calls AS (
    SELECT step, agent_id, input_tokens, prompt_chars, prefix_chars,
           row_number() OVER (PARTITION BY step, agent_id ORDER BY call_id) AS n
    FROM llm_calls WHERE caller LIKE 'agent:%'
)
SELECT step, count(*) AS calls, quantile_disc(input_tokens, 0.5) AS p50, quantile_disc(input_tokens, 0.95) AS p95,
       sum(coalesce(prefix_chars, 0)) / sum(prompt_chars) AS share,
       sum(coalesce(prefix_chars, 0)) FILTER (n = 1) / sum(prompt_chars) FILTER (n = 1) AS first_share
FROM calls GROUP BY step ORDER BY step
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=positive, default=40)
    parser.add_argument("--ticks", type=positive, default=6)
    parser.add_argument("--budget", type=positive, default=None, help="the spec's context_budget, in tokens")
    args = parser.parse_args()
    spec = parse_spec({
        "name": "prefix", "seed": 1, "population": [{"count": args.agents}], "context_budget": args.budget,
        "llm": {"default": {"model": "sim/social"}}, "environment": {"modules": [{"type": "SocialMediaSpace"}]},
        "steps": [{"type": "run", "num_steps": args.ticks, "tick": 3600}],
    })
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder) / "run"
        summary = asyncio.run(run_experiment(spec, run, InProcessShell()))
        with ReplayReader(run) as reader:
            rows = reader.query(PER_TICK).to_pylist()
            total = reader.query("SELECT sum(coalesce(prefix_chars, 0)) / sum(prompt_chars) AS share FROM llm_calls "
                                 "WHERE caller LIKE 'agent:%' AND step > 1").to_pylist()[0]["share"]
    print(f"{args.agents} agents x {args.ticks} ticks: {summary.status}")
    for r in rows:
        print(f"tick {r['step']}: calls {r['calls']}; prompt tokens p50 {r['p50']} p95 {r['p95']}; reusable prefix "
              f"{r['share']:.2f} of all prompt characters, {r['first_share'] or 0:.2f} on a step's first call")
    print(f"ticks 2-{args.ticks}: reusable prefix {total:.2f} of all prompt characters")


if __name__ == "__main__":
    main()
