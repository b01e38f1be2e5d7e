"""Agent memory in layers: the thread window, AGENT_MEMORY.md (compacted), and typed episodes.

    ThreadMemory    recent turns; older ones compacted into AGENT_MEMORY.md by one LLM call
    EpisodeStore    ``finish(memories=[...])`` appends to memory/episodes.jsonl; search and recent
"""

from engine.agent.memory.episodes import Episode, EpisodeIn, EpisodeKind, EpisodeStore, FinishWithMemories
from engine.agent.memory.thread import Compaction, CompactionResult, MemoryConfig, ThreadMemory, read_memory_summary

__all__ = [
    "Compaction",
    "CompactionResult",
    "Episode",
    "EpisodeIn",
    "EpisodeKind",
    "EpisodeStore",
    "FinishWithMemories",
    "MemoryConfig",
    "ThreadMemory",
    "read_memory_summary",
]
