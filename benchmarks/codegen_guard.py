"""How much generated code the sandbox's guard refuses, with the modules it offered before and now.

Three sets of programs, each checked by the guard twice: with the modules of the guard before
issue 11 (math, statistics, datetime, json: ``check_code(..., modules=BEFORE)``) and with today's
(``MODULE_MEMBERS``). ``--main PATH`` also checks them with the guard of another checkout (the
main branch, as committed), in a subprocess, which measures every other change too (the ``_`` name).

- ``sim``: the code the simulated LLM writes for CodeGenRouter asks (it picks one of the
  decision schema's ``code`` examples), over several env modules, seeds, read-only and template asks;
- ``coder``: programs in the style real coder models write for these tools, using collections,
  itertools, functools, operator, random and re (written for this benchmark, see ``CODER``);
- ``smollm2`` (``--smollm2 N``): N asks answered by the offline model ``local/smollm2``
  (SmolLM2-135M), when it is installed. It writes code badly: most answers are not even valid
  JSON for the decision schema; those are counted apart, not as refusals.

Run: ``python benchmarks/codegen_guard.py [--smollm2 20] [--main /path/to/main]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.env.base import EnvBase
from engine.env.modules.economy import EconomySpace
from engine.env.modules.messaging import MessagingSpace
from engine.env.modules.social_media import SocialMediaSpace
from engine.env.routers.codegen import CodeGenRouter
from engine.env.sandbox import CodeRejectedError, ThreadExecutor, check_code
from engine.env.sandbox.offered import MODULE_MEMBERS
from engine.env.sandbox.runtime import RESERVED_NAMES
from engine.llm.backends.sim_backend import SimChatModel
from engine.llm.protocol import ChatModel, ChatResult

#: The modules the guard offered before issue 11.
BEFORE = {name: MODULE_MEMBERS[name] for name in ("math", "statistics", "datetime", "json")}
_INSTRUCTIONS = ["what is going on?", "tell agent 2 hello", "summarise my inbox", "post news to group town",
                 "do something useful"]  # fmt: skip

#: Programs as coder models write them against MessagingSpace's tools (read_inbox, send_message, ...).
CODER: list[str] = [
    "from collections import Counter\ninbox = read_inbox()\nwords = Counter(inbox.lower().split())\n"
    "results['answer'] = words.most_common(3)",
    "import collections\ncounts = collections.defaultdict(int)\nfor line in read_inbox().splitlines():\n"
    "    counts[line[:10]] += 1\nresults['answer'] = dict(counts)",
    "import re\nsenders = re.findall(r'from agent (\\d+)', read_inbox())\nresults['answer'] = sorted(set(senders))",
    "import re\nm = re.search(r'agent (\\d+)', read_inbox())\nif m:\n    send_message(int(m.group(1)), 'thanks!')\n"
    "results['answer'] = bool(m)",
    "import random\ntarget = random.choice([2, 3, 4])\nsend_message(to_agent_id=target, content='hi there')",
    "import random\nrandom.seed(42)\ngreeting = random.choice(['hi', 'hello', 'hey'])\nsend_message(2, f'{greeting} from me')",
    "import itertools\nfor a, b in itertools.combinations([2, 3, 4], 2):\n    print(a, b)\nresults['answer'] = 'pairs listed'",
    "from itertools import islice\nlines = read_inbox().splitlines()\nresults['answer'] = list(islice(lines, 3))",
    "import functools, operator\ntotal = functools.reduce(operator.add, [1, 2, 3])\nresults['answer'] = total",
    "from operator import itemgetter\nrows = [(2, 'b'), (1, 'a')]\nresults['answer'] = sorted(rows, key=itemgetter(0))",
    "from collections import deque\nrecent = deque(read_inbox().splitlines(), maxlen=2)\nresults['answer'] = list(recent)",
    "import json\nstats = message_statistics()\nresults['answer'] = json.dumps(stats)",
    "import math\nresults['answer'] = math.sqrt(16)",
    "for _ in range(2):\n    send_message(to_agent_id=2, content='ping')",
    "results['answer'] = [read_inbox() for _ in range(1)][0]",
    "import re\ntext = read_inbox()\nclean = re.sub(r'\\s+', ' ', text).strip()\nresults['answer'] = clean[:200]",
    "from collections import namedtuple\nMsg = namedtuple('Msg', 'to text')\nm = Msg(2, 'hello')\nsend_message(m.to, m.text)",
    "import random\nagents = [2, 3, 4, 5]\nrandom.shuffle(agents)\nfor a in agents[:2]:\n    send_message(a, 'random hello')",
    "import itertools\ngroups = list_groups()\nresults['answer'] = list(itertools.chain([groups], ['done']))",
    "import statistics\nresults['answer'] = statistics.mean([1, 2, 3])",
    "import re\nif re.match(r'^\\s*$', read_inbox()):\n    results['status'] = 'fail'\n    results['answer'] = 'empty inbox'",
    "from functools import partial\nsend_to_two = partial(send_message, 2)\nsend_to_two('hello')",
    "import os\nresults['answer'] = os.getcwd()",
    "import sys\nresults['answer'] = sys.version",
    "class Helper:\n    pass\nresults['answer'] = 'x'",
    "with open('x.txt') as f:\n    results['answer'] = f.read()",
    "x = read_inbox()\nresults['answer'] = x.__len__()",
    "import numpy as np\nresults['answer'] = float(np.mean([1, 2]))",
    "import datetime\nresults['answer'] = str(datetime.date(2024, 1, 1))",
    "from random import randint\nsend_message(randint(2, 5), 'lucky you')",
]


class Recording:
    """A ChatModel that keeps the text of every answer of the model it wraps."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.texts: list[str] = []

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        result = await self.inner.complete(messages, **kwargs)
        self.texts.append(result.text or "")
        return result


def _codes(texts: Iterable[str]) -> tuple[list[str], int]:
    """The ``code`` of each answer, and how many answers had none (not the decision's JSON)."""
    codes, unparsable = [], 0
    for text in texts:
        try:
            code = json.loads(text).get("code")
        except (ValueError, AttributeError):
            code = None
        if isinstance(code, str):
            codes.append(code)
        else:
            unparsable += 1
    return codes, unparsable


def _modules() -> list[list[EnvBase]]:
    return [[MessagingSpace()], [EconomySpace()], [SocialMediaSpace()], [MessagingSpace(), EconomySpace()]]


async def _ask_all(make_llm: Any, seeds: Iterable[int], modules_sets: list[list[EnvBase]]) -> tuple[list[str], list[str]]:
    """Ask every instruction of every module set; returns the codes and the tool names they could call."""
    texts: list[str] = []
    tools: set[str] = set()
    for seed in seeds:
        for modules in modules_sets:
            llm = Recording(make_llm(seed))
            router = CodeGenRouter(modules, llm, sandbox=ThreadExecutor(), max_steps=1)
            tools |= set(router.tools())
            for i, instruction in enumerate(_INSTRUCTIONS):
                template = "tell agent {to} {content}" if i == 1 else None
                ctx: dict[str, Any] = {"agent_id": 1}
                if template:
                    ctx["variables"] = {"to": 2, "content": "hello"}
                await router.ask(ctx, template or instruction, readonly=i % 2 == 0, template_mode=template is not None)
            texts += llm.texts
    codes, _ = _codes(texts)
    return codes, sorted(tools)


def refusals(codes: list[str], reserved: set[str], modules: Any) -> list[str]:
    """The first problem the guard names in each program it refuses (without its line number)."""
    found = []
    for code in codes:
        try:
            check_code(code, reserved=reserved, modules=modules)
        except CodeRejectedError as error:
            found.append(error.problems[0].partition(": ")[2][:90])
    return found


_MAIN_CHECK = """
import json, sys
from engine.env.sandbox import CodeRejectedError, check_code
data = json.load(sys.stdin)
n = 0
for code in data["codes"]:
    try:
        check_code(code, reserved=set(data["reserved"]))
    except CodeRejectedError:
        n += 1
print(n)
"""


def refused_by_checkout(root: Path, codes: list[str], reserved: set[str]) -> int:
    """Refusals by the guard of another checkout (run with that tree on the path)."""
    out = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", _MAIN_CHECK], input=json.dumps({"codes": codes, "reserved": sorted(reserved)}),
        capture_output=True, text=True, check=True, cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return int(out.stdout.strip())


def report(name: str, codes: list[str], reserved: set[str], main: Path | None) -> None:
    m = len(codes)
    after = refusals(codes, reserved, MODULE_MEMBERS)
    print(f"{name}: {m} programs")
    print(f"  refused before: {len(refusals(codes, reserved, BEFORE))}/{m}")
    if main is not None:
        print(f"  refused by {main}: {refused_by_checkout(main, codes, reserved)}/{m}")
    print(f"  refused after: {len(after)}/{m}")
    for reason, count in Counter(after).most_common(5):
        print(f"    {count} x {reason}")


async def _smollm2(asks: int) -> tuple[list[str], int, int] | None:
    from engine.llm.client import LLMClient
    from engine.llm.dispatcher import get_chat_model
    from engine.llm.local import LocalModelMissingError, resolve_local_clients

    try:
        with resolve_local_clients({"coder": LLMClient(role="coder", model="local/smollm2")}) as clients:
            llm = Recording(get_chat_model(clients["coder"]))
            router = CodeGenRouter([MessagingSpace()], llm, sandbox=ThreadExecutor(), max_steps=1)
            for i in range(asks):
                await router.ask({"agent_id": 1}, _INSTRUCTIONS[i % len(_INSTRUCTIONS)], readonly=i % 2 == 0)
    except LocalModelMissingError as error:
        print(f"smollm2: not available ({error})")
        return None
    codes, unparsable = _codes(llm.texts)
    return codes, unparsable, len(llm.texts)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="simulated-LLM seeds per module set")
    parser.add_argument("--smollm2", type=int, default=0, help="asks answered by local/smollm2 (0: skip)")
    parser.add_argument("--main", type=Path, default=None, help="a checkout whose guard to compare with")
    args = parser.parse_args(argv)

    sim_codes, tools = await _ask_all(lambda seed: SimChatModel("router", seed), range(args.seeds), _modules())
    reserved = set(RESERVED_NAMES) | set(tools)
    report("sim", sim_codes, reserved, args.main)
    report("coder", CODER, reserved, args.main)
    if args.smollm2:
        outcome = await _smollm2(args.smollm2)
        if outcome is not None:
            codes, unparsable, answers = outcome
            print(f"smollm2: {answers} answers, {unparsable} without a decision's code (not JSON of the schema)")
            report("smollm2", codes, reserved, args.main)


if __name__ == "__main__":
    asyncio.run(main())
