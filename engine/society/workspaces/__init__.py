"""Where a run keeps its agents' workspaces, and one agent-step on each kind.

- :mod:`~engine.society.workspaces.manifest`: packed runs (the default): packs and the workspace manifest a commit names.
- :mod:`~engine.society.workspaces.packed`: an agent-step in memory, and the pack its batch writes.
- :mod:`~engine.society.workspaces.journaled`: an agent-step on a folder (``dir`` runs), undone by its journal.
- :mod:`~engine.society.workspaces.common`: what both share.
"""

__all__: list[str] = []
