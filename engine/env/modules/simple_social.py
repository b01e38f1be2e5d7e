"""SimpleSocialSpace: MessagingSpace with the reference system's tool names.

The reference's ``SimpleSocialSpace`` offers ``send_message``, ``receive_messages`` (its observation;
it empties the mailbox), ``create_group``, ``join_group``, ``leave_group`` and ``send_group_message``.
The ones MessagingSpace lacks are added here, in a module of their own so that specs naming
``MessagingSpace`` keep exactly its tools (and the runs a seed reproduces stay as they were).

``receive_messages`` is a tool, not the per-tick observation: an observation runs read-only, and
emptying the mailbox is a change. Like every change here it is queued and applied at the tick's env
step, so a re-run agent-step receives the same messages.
"""

from __future__ import annotations

from typing import Any

from engine.env.modules.messaging import MessagingSpace
from engine.env.tool import tool
from engine.env.update_queue import Update

__all__ = ["SimpleSocialSpace"]


class SimpleSocialSpace(MessagingSpace):
    """A messaging space with the reference's tools: receive new messages, create and leave groups, message a group.

    Args:
        groups: initial groups, name -> member agent ids.
        inbox_limit: how many recent messages ``read_inbox`` shows.
        max_length: longest message accepted, in characters.
        agent_id_name_pairs: ``[[agent_id, name], ...]``: the names agents are known by.
    """

    def __init__(self, groups: dict[str, list[int]] | None = None, inbox_limit: int = 10, max_length: int = 1000,
                 agent_id_name_pairs: list[tuple[int, str]] | None = None) -> None:
        super().__init__(groups=groups, inbox_limit=inbox_limit, max_length=max_length,
                         agent_id_name_pairs=agent_id_name_pairs)
        self._received: dict[int, int] = {}  #: per agent: how many inbox messages receive_messages has handed over

    @tool(readonly=False)
    def receive_messages(self, agent_id: int) -> str:
        """Hand over the messages agent_id has not received yet; they leave the mailbox at the end of this step."""
        self.check_agent(agent_id)
        inbox = self._inboxes.get(agent_id, [])
        new = inbox[self._received.get(agent_id, 0) :]
        if not new:
            return "No new messages."
        self._queue(kind="received", sender=agent_id, recipient=None, group=None, content=None, upto=len(inbox))
        return f"{len(new)} new messages:\n" + "\n".join(map(self._render, new))

    @tool(readonly=False)
    def create_group(self, agent_id: int, group: str, member_ids: list[int] | None = None) -> str:
        """Create a group with agent_id and member_ids as its members (effective at the end of this step)."""
        self.check_agent(agent_id)
        for member in member_ids or []:
            self.check_agent(member)
        if group in self._groups:
            raise ValueError(f"group {group!r} already exists; join it instead")
        self._queue(kind="create", sender=agent_id, recipient=None, group=group, content=None,
                    members=sorted({agent_id, *(member_ids or [])}))
        return f"group {group!r} will exist from the next step"

    @tool(readonly=False)
    def leave_group(self, agent_id: int, group: str) -> str:
        """Leave a group (effective at the end of this step)."""
        self.check_agent(agent_id)
        if agent_id not in self._groups.get(group, []):
            return f"not a member of {group!r}"
        self._queue(kind="leave", sender=agent_id, recipient=None, group=group, content=None)
        return f"you will leave {group!r} at the end of this step"

    @tool(readonly=False)
    def send_group_message(self, agent_id: int, group: str, content: str) -> str:
        """Send a message to a group (joining it if needed); every other member receives it at the end of this step."""
        return self.post_to_group(agent_id, group, content)

    def apply_update(self, update: Update) -> None:
        """Apply a receipt, a group creation or a leave; everything else as MessagingSpace does."""
        kind, sender, group = update["kind"], update["sender"], update["group"]
        if kind == "received":
            self._received[sender] = max(self._received.get(sender, 0), update["upto"])
        elif kind == "create":
            self._groups.setdefault(group, list(update["members"]))
        elif kind == "leave":
            if sender in self._groups.get(group, []):
                self._groups[group].remove(sender)
        else:
            super().apply_update(update)

    def dump_state(self) -> dict[str, Any]:
        return {**super().dump_state(), "received": {str(k): v for k, v in self._received.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self._received = {int(k): v for k, v in state.get("received", {}).items()}
