"""An intervention's end on the env router (the actor object, in this process) applies every module's queued updates, and the snapshot after it holds none."""

from __future__ import annotations

import json
from datetime import datetime

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndConsult
from engine.env.requests import EnvRequest
from engine.storage.run_layout import RunLayout

START = datetime(2026, 1, 1, 8)
MODULES = (
    ("MessagingSpace", {}),
    ("GlobalInformationSpace", {}),
    ("EconomySpace", {"accounts": {0: 100.0}, "goods": {"bread": 2.5}}),
    ("EventSpace", {}),
    ("SocialMediaSpace", {}),
    ("MobilitySpace", {}),
    ("PrisonersDilemmaGame", {}),
    ("PublicGoodsGame", {"group_size": 2}),
    ("TrustGame", {}),
)
CALLS = [
    ("send_message", {"agent_id": 0, "to_agent_id": 1, "content": "hi"}),
    ("broadcast", {"agent_id": 0, "text": "the market opens at 9"}),
    ("buy", {"agent_id": 0, "good": "bread", "quantity": 2}),
    ("announce_event", {"agent_id": 0, "title": "picnic", "start": "2026-01-01T10:00", "end": "2026-01-01T11:00"}),
    ("create_post", {"agent_id": 0, "text": "hello"}),
    ("move_to", {"agent_id": 0, "destination": "r5"}),
    ("play", {"agent_id": 0, "move": "cooperate"}),
    ("contribute", {"agent_id": 0, "amount": 3}),
    ("invest", {"agent_id": 0, "amount": 4}),
]


def _saved(run_dir, module: str) -> dict:
    path = RunLayout(run_dir).env_snapshots / "txn_000001" / module / "state" / "ENV_STATE.json"
    return json.loads(path.read_text())


async def test_an_intervention_settles_the_queued_updates_of_every_module_and_the_snapshot_keeps_none(tmp_path):
    handle = EnvRouterActor(EnvRouterConfig(modules=MODULES, run_dir=tmp_path))
    await handle.init(START, [0, 1, 2, 3])
    replies = await handle.ask_many([EnvRequest("call_tool", 0, name, arguments=args) for name, args in CALLS])
    assert [r.status for r in replies] == ["success"] * len(CALLS), [r.answer for r in replies]

    assert (await handle.end_consult(EndConsult(1))).snapshot is None  # an ask's end: nothing settled, no snapshot
    assert not RunLayout(tmp_path).env_snapshots.exists()
    end = await handle.end_consult(EndConsult(1, settle=True))
    assert (end.refused, end.snapshot) == (0, "txn_000001")

    saved = {name: _saved(tmp_path, name) for name, _ in MODULES}
    assert all(s["updates"]["updates"] == [] for s in saved.values())
    state = {name: s["state"] for name, s in saved.items()}
    assert [m["content"] for m in state["MessagingSpace"]["inboxes"]["1"]] == ["hi"]
    assert [f["text"] for f in state["GlobalInformationSpace"]["facts"]] == ["the market opens at 9"]
    assert state["EconomySpace"]["accounts"]["0"]["cash"] == 95.0
    assert [e["title"] for e in state["EventSpace"]["events"]] == ["picnic"]
    assert [p["text"] for p in state["SocialMediaSpace"]["posts"]] == ["hello"]
    assert list(state["MobilitySpace"]["trips"]) == ["0"]
    assert state["PrisonersDilemmaGame"]["moves"] == {"0": "cooperate"}
    assert state["PublicGoodsGame"]["moves"] == {"0": 3}
    assert state["TrustGame"]["moves"] == {"0": 4}
    await handle.close()
