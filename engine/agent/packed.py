"""Agent workspaces kept in packs (:mod:`engine.storage.packs`): loaded into memory, stepped, packed again.

A batch loads each of its agents as a :class:`~engine.agent.workspace.MemoryWorkspace` from the pack
the last commit lists for it (files are fetched only when read), steps them, and writes one new
pack holding what the step changed. Nothing is written per agent, and rolling a step back is
dropping the workspace.

A file keeps its segments while it is unchanged, gains one when appended to, and is stored whole
when rewritten, or when one of its segments is ``checkpoint_every`` transactions old: so every
tree reads from at most ``checkpoint_every`` packs, and old packs fall out of use.
"""

from __future__ import annotations

import functools
from pathlib import Path

from engine.agent.workspace import AgentWorkspace, DirWorkspace, workspace_name
from engine.agent.workspace_in_memory import MemoryWorkspace
from engine.storage.packs import PackReader, PackWriter, Segment, Tree
from engine.storage.store import Store

__all__ = ["DEFAULT_CHECKPOINT_EVERY", "PackedWorkspaces", "export_workspace"]

#: Transactions after which a file's old segments are rewritten into a new pack.
DEFAULT_CHECKPOINT_EVERY = 8


class PackedWorkspaces:
    """Agents' workspaces held in the packs of one store (one instance per batch: it caches readers).

    Args:
        store: where the packs are.
        checkpoint_every: see the module docstring.
    """

    def __init__(self, store: Store, *, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY) -> None:
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be at least 1")
        self.store = store
        self.checkpoint_every = checkpoint_every
        self._readers: dict[str, PackReader] = {}
        self._trees: dict[int, Tree] = {}

    def reader(self, pack: str) -> PackReader:
        found = self._readers.get(pack)
        if found is None:
            found = self._readers[pack] = PackReader(self.store, pack)
        return found

    def load(self, agent_id: int, pack: str) -> MemoryWorkspace:
        """The agent's workspace as pack ``pack`` lists it.

        Raises:
            PackCorruptError: the pack (or an older one a file reads from) fails its checksum, when read.
            KeyError: the agent is not in that pack.
        """
        tree = self.reader(pack).tree(agent_id)
        self._trees[agent_id] = tree

        def loader(segments: tuple[Segment, ...]) -> bytes:
            return b"".join(self.reader(s.pack).frame(agent_id)[s.start:s.start + s.length] for s in segments)

        files = {path: (tree.size(path), functools.partial(loader, segments)) for path, segments in tree.files.items()}
        return MemoryWorkspace(workspace_name(agent_id), files, tree.dirs)

    def pack(self, writer: PackWriter, agent_id: int, workspace: AgentWorkspace) -> Tree:
        """Add the agent's workspace as it is now to ``writer``: changes as new bytes, the rest as segments kept.

        ``workspace``: one :meth:`load` returned (or a new one, for an agent being created).
        """
        base = self._trees.get(agent_id) if isinstance(workspace, MemoryWorkspace) else None
        changes = workspace.changes() if isinstance(workspace, MemoryWorkspace) and base is not None else None
        oldest = writer.txn - self.checkpoint_every
        files: dict[str, list[Segment | bytes]] = {}
        for path in workspace.files():
            kept = base.files.get(path) if base is not None and changes is not None and path not in changes.replaced else None
            if kept is not None and changes is not None and all(s.txn > oldest for s in kept):
                files[path] = [*kept, changes.appended.get(path, b"")]
            else:
                files[path] = [workspace.read_bytes(path)]
        tree = writer.add(agent_id, files, workspace.dirs())
        self._trees[agent_id] = tree
        return tree


def export_workspace(workspace: AgentWorkspace, dest: Path) -> int:
    """Write ``workspace`` as a folder in AS2's layout (``dest`` is the agent's folder); returns the bytes written."""
    out = DirWorkspace(dest)
    out.make_dir("")
    for folder in workspace.dirs():
        out.make_dir(folder)
    written = 0
    for path in workspace.files():
        data = workspace.read_bytes(path)
        out.write_bytes(path, data)
        written += len(data)
    return written

