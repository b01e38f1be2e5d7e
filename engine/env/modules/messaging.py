"""MessagingSpace: direct messages between agents and posts to named groups.

Updates are synchronous: messages, posts and joins made during a tick are queued and applied when
the tick's env step runs, in (agent id, call order) order. Every agent in a tick therefore reads
the same start-of-tick state, and a tick's outcome does not depend on how agents were batched or
interleaved, which is what makes runs with a fixed seed reproducible. The experimenter's system
messages queue the same way (ahead of agents' updates); ``apply_pending`` delivers a queue between
ticks (after an intervention).

``contacts`` (a network layer: ``network: {contacts: friend}``) limits whom an agent may message directly to those
it links to in the layer (either way, in an undirected one); a message to anyone else is refused with the list of
the agent's contacts. Without it, anyone may message anyone.

``agent_id_name_pairs`` gives agents the names that messages and receipts show (``from Alice
(agent 1)``); the reference system's ``SimpleSocialSpace`` (:mod:`engine.env.modules.simple_social`)
adds its tool names on top.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine.env.base import EXPERIMENTER_ID, EnvBase
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.network.graph import Graph
from engine.storage.catalog import Column, DatasetSchema

__all__ = ["MessagingSpace"]

#: A refused message names the sender's first this many contacts, then counts the rest.
CONTACTS_SHOWN = 20

_STATE = DatasetSchema(
    name="env_messaging",
    kind="env",
    description="MessagingSpace state after each env step",
    columns=(
        Column(name="step", type="int64", description="society step (1-based) that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="delivered", type="int64", description="messages delivered in this step"),
        Column(name="messages_total", type="int64", description="messages delivered since the start"),
        Column(name="group_posts_total", type="int64", description="group posts since the start"),
        Column(name="groups", type="int64", description="number of groups"),
        Column(name="agents_with_mail", type="int64", description="agents whose inbox is not empty"),
    ),
)
_EVENTS = DatasetSchema(
    name="messages",
    kind="env",
    description="every message and group post, as delivered",
    columns=(
        Column(name="step", type="int64", description="step in which it was delivered"),
        Column(name="t", type="timestamp", description="simulated time of delivery"),
        Column(name="kind", type="string", description="direct | group | system"),
        Column(name="sender", type="int64", description="sending agent id (null for system messages)"),
        Column(name="recipient", type="int64", description="receiving agent id (direct messages)"),
        Column(name="group", type="string", description="group name (group posts)"),
        Column(name="content", type="string", description="message text"),
    ),
)


class MessagingSpace(EnvBase):
    """A messaging space: agents send direct messages, read their inbox, and post to groups.

    Args:
        groups: initial groups, name -> member agent ids.
        inbox_limit: how many recent messages ``read_inbox`` shows.
        max_length: longest message accepted, in characters.
        agent_id_name_pairs: ``[[agent_id, name], ...]``: the names agents are known and written to by.
        contacts: whom each agent may message directly (a network layer, or inline: agent id -> ids); None: anyone.

    Raises:
        SpecError: an id or a name appears twice in ``agent_id_name_pairs``.
    """

    METRICS = {
        "messages_sent": "direct messages and group posts agents sent in this step (delivered at its end)",
        "direct_messages": "direct messages agents sent in this step",
        "group_posts": "group posts agents sent in this step",
        "system_messages": "messages the experimenter sent in this step",
        "active_senders": "distinct agents who sent a direct message or a group post in this step",
    }

    def __init__(self, groups: dict[str, list[int]] | None = None, inbox_limit: int = 10, max_length: int = 1000,
                 agent_id_name_pairs: list[tuple[int, str]] | None = None,
                 contacts: dict[int, list[int]] | Graph | None = None) -> None:
        super().__init__()
        self._contacts = Graph.from_adjacency(contacts) if isinstance(contacts, dict) else contacts
        self._names: dict[int, str] = {}
        for agent_id, name in agent_id_name_pairs or []:
            if int(agent_id) in self._names or name in self._names.values():
                raise SpecError(f"agent_id_name_pairs: agent {agent_id} or name {name!r} appears twice")
            self._names[int(agent_id)] = str(name)
        self._groups: dict[str, list[int]] = {k: sorted(set(v)) for k, v in (groups or {}).items()}
        self._inbox_limit = inbox_limit
        self._max_length = max_length
        self._inboxes: dict[int, list[dict[str, Any]]] = {}
        self._delivered_last: list[dict[str, Any]] = []
        self._delivered_unreported: list[dict[str, Any]] = []  #: delivered since the last step (by apply_pending)
        self._messages_total = 0
        self._posts_total = 0

    def _queue(self, **op: Any) -> None:
        self.updates.queue(EXPERIMENTER_ID if op["sender"] is None else op["sender"], **op)

    def _who(self, agent_id: int) -> str:
        name = self._names.get(agent_id)
        return f"{name} (agent {agent_id})" if name else f"agent {agent_id}"

    def _render(self, message: dict[str, Any]) -> str:
        sender = "the experimenter (system)" if message["sender"] is None else self._who(message["sender"])
        return f"- from {sender}" + (f" in group {message['group']}" if message["group"] else "") + f": {message['content']}"

    def _contact_list(self, agent_id: int) -> str:
        assert self._contacts is not None
        contacts = self._contacts.successors(agent_id)
        if not contacts:
            return "you have none"
        shown = ", ".join(self._who(c) for c in contacts[:CONTACTS_SHOWN])
        more = f" and {len(contacts) - CONTACTS_SHOWN} more" if len(contacts) > CONTACTS_SHOWN else ""
        return f"your {len(contacts)} contacts: {shown}{more}"

    def _check_text(self, content: str) -> str:
        content = content.strip()
        if not content:
            raise ValueError("an empty message cannot be sent")
        if len(content) > self._max_length:
            raise ValueError(f"message longer than {self._max_length} characters")
        return content

    @tool(readonly=False)
    def send_message(self, agent_id: int, to_agent_id: int, content: str) -> str:
        """Send a direct message from agent_id to to_agent_id; it arrives at the end of this step."""
        self.check_agent(agent_id)
        self.check_agent(to_agent_id)
        if self._contacts is not None and agent_id != to_agent_id and not self._contacts.has_edge(agent_id, to_agent_id):
            raise ValueError(f"{self._who(to_agent_id)} is not one of your contacts; {self._contact_list(agent_id)}")
        self._queue(kind="direct", sender=agent_id, recipient=to_agent_id, group=None, content=self._check_text(content))
        return f"message to {self._who(to_agent_id)} queued for delivery"

    @tool(readonly=False)
    def post_to_group(self, agent_id: int, group: str, content: str) -> str:
        """Post a message to a group (joining it if needed); every other member receives it at the end of this step."""
        self.check_agent(agent_id)
        text = self._check_text(content)
        self._queue(kind="group", sender=agent_id, recipient=None, group=group, content=text)
        return f"post to group {group!r} queued for delivery"

    @tool(readonly=False)
    def join_group(self, agent_id: int, group: str) -> str:
        """Join a group (effective at the end of this step)."""
        self.check_agent(agent_id)
        if agent_id in self._groups.get(group, []):
            return f"already a member of {group!r}"
        self._queue(kind="join", sender=agent_id, recipient=None, group=group, content=None)
        return f"you will be a member of {group!r} from the next step"

    @tool(readonly=False, experimenter=True)
    def send_system_message(self, agent_id: int, to_agent_id: int, content: str) -> str:
        """Experimenter only: send to_agent_id a message from the system; it arrives at the end of this step."""
        if agent_id != EXPERIMENTER_ID:
            raise ValueError("only the experimenter can send system messages")
        self.check_agent(to_agent_id)
        self._queue(kind="system", sender=None, recipient=to_agent_id, group=None, content=self._check_text(content))
        return f"system message to agent {to_agent_id} queued for delivery"

    @tool(readonly=True, kind="observe")
    def read_inbox(self, agent_id: int) -> str:
        """Show the most recent messages received by agent_id (the inbox is not emptied)."""
        inbox = self._inboxes.get(agent_id, [])
        if not inbox:
            return "Your inbox is empty."
        recent = inbox[-self._inbox_limit :]
        return f"Inbox ({len(inbox)} messages, latest {len(recent)}):\n" + "\n".join(map(self._render, recent))

    @tool(readonly=True)
    def list_groups(self, agent_id: int) -> str:
        """List the groups and whether agent_id is a member."""
        if not self._groups:
            return "There are no groups yet."
        return "\n".join(
            f"- {name}: {len(members)} members" + (" (you are a member)" if agent_id in members else "")
            for name, members in sorted(self._groups.items())
        )

    @tool(readonly=True, kind="statistics")
    def message_statistics(self) -> str:
        """Totals of delivered messages and group posts."""
        return f"{self._messages_total} direct messages and {self._posts_total} group posts delivered; {len(self._groups)} groups"

    def _join(self, agent_id: int, group: str) -> list[int]:
        members = self._groups.setdefault(group, [])
        if agent_id not in members:
            members.append(agent_id)
            members.sort()
        return members

    def apply_update(self, update: Update) -> None:
        """Deliver one queued message, post or join at ``self.t``; the next env step reports it."""
        if update["kind"] == "join":
            self._join(update["sender"], update["group"])
            return
        stamp = self.t.isoformat() if self.t else None
        message = {k: update[k] for k in ("kind", "sender", "recipient", "group", "content")} | {"t": stamp}
        if update["kind"] in ("direct", "system"):
            self._inboxes.setdefault(update["recipient"], []).append(message)
            self._messages_total += 1
        else:
            for member in self._join(update["sender"], update["group"]):
                if member != update["sender"]:
                    self._inboxes.setdefault(member, []).append(message)
            self._posts_total += 1
        self._delivered_unreported.append(message)

    async def step(self, tick: int, t: datetime) -> None:
        self.t = t
        self.apply_pending()
        self._delivered_last, self._delivered_unreported = self._delivered_unreported, []

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [_STATE, _EVENTS]

    def metrics(self) -> dict[str, float]:
        kinds = [m["kind"] for m in self._delivered_last]
        senders = {m["sender"] for m in self._delivered_last if m["sender"] is not None}
        return {"messages_sent": float(kinds.count("direct") + kinds.count("group")), "direct_messages": float(kinds.count("direct")),
                "group_posts": float(kinds.count("group")), "system_messages": float(kinds.count("system")),
                "active_senders": float(len(senders))}

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        state = {
            "step": step,
            "t": t,
            "delivered": len(self._delivered_last),
            "messages_total": self._messages_total,
            "group_posts_total": self._posts_total,
            "groups": len(self._groups),
            "agents_with_mail": sum(1 for inbox in self._inboxes.values() if inbox),
        }
        events = [
            {"step": step, "t": t, "kind": m["kind"], "sender": m["sender"], "recipient": m["recipient"],
             "group": m["group"], "content": m["content"]}
            for m in self._delivered_last
        ]
        return {_STATE.name: [state], _EVENTS.name: events}

    def dump_state(self) -> dict[str, Any]:
        return {
            "groups": self._groups,
            "inboxes": {str(k): v for k, v in self._inboxes.items()},
            "delivered_unreported": self._delivered_unreported,
            "messages_total": self._messages_total,
            "posts_total": self._posts_total,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._groups = {k: list(v) for k, v in state["groups"].items()}
        self._inboxes = {int(k): v for k, v in state["inboxes"].items()}
        self._delivered_unreported = list(state.get("delivered_unreported", []))
        self._messages_total = state["messages_total"]
        self._posts_total = state["posts_total"]
