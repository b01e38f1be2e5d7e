"""Forks at any kept tick and reads of a run as it was then (:mod:`engine.society.history` keeps the ticks)."""

from engine.society.fork.as_of import AsOf, AsOfAgents, check_as_of_kept, check_as_of_steps, find_as_of
from engine.society.fork.materialize import ForkPoint, ForkReport, find_fork_point, materialize_fork, plan_fork
from engine.society.fork.plan import ForkSpec, fork_spec, merge_patch

__all__ = ["AsOf", "AsOfAgents", "ForkPoint", "ForkReport", "ForkSpec", "check_as_of_kept", "check_as_of_steps", "find_as_of", "find_fork_point", "fork_spec", "materialize_fork", "merge_patch", "plan_fork"]
