"""UpdateQueue: queue, discard by agent, drain in (agent id, seq) order, dump and load."""

from __future__ import annotations

import json

from engine.env.base import EXPERIMENTER_ID
from engine.env.update_queue import UpdateQueue


def test_drain_orders_by_agent_then_call_order_with_the_experimenter_first_and_empties_the_queue() -> None:
    queue = UpdateQueue()
    for agent_id, text in [(2, "b1"), (1, "a1"), (EXPERIMENTER_ID, "x"), (2, "b2"), (1, "a2")]:
        queue.queue(agent_id, text=text)
    assert [u["text"] for u in queue.drain()] == ["x", "a1", "a2", "b1", "b2"]
    assert len(queue) == 0 and queue.drain() == []


def test_discard_drops_only_that_agents_updates_and_seq_keeps_counting() -> None:
    queue = UpdateQueue()
    queue.queue(1, n=1)
    queue.queue(2, n=2)
    queue.queue(1, n=3)
    assert queue.discard(1) == 2
    assert queue.discard(1) == 0
    retried = queue.queue(1, n=4)
    assert retried.seq == 4  # a retried call never reuses an earlier call's place
    assert [(u.agent_id, u["n"]) for u in queue.all()] == [(2, 2), (1, 4)]
    assert [u["n"] for u in queue.of(1)] == [4]


def test_dump_and_load_round_trip_through_json() -> None:
    queue = UpdateQueue()
    queue.queue(3, kind="post", text="hi")
    queue.queue(1, kind="like", post_id=7)
    restored = UpdateQueue()
    restored.load(json.loads(json.dumps(queue.dump())))
    assert restored.all() == queue.all()
    assert restored.queue(1, kind="like", post_id=8).seq == 3
    assert [(u.agent_id, u.seq) for u in restored.drain()] == [(1, 2), (1, 3), (3, 1)]
