"""The env modules' own replay datasets as a run records them: each module's declaration, ``run`` first.

A module declares the columns it knows (:meth:`EnvBase.replay_datasets`) and returns rows without a
run id (:meth:`EnvBase.replay_rows`); the env actor stamps every row with the run id of the driver
that committed it, as every other dataset carries it. The driver registers these schemas and the
actor writes with them, so both agree on the stamped column. This module has no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.storage.catalog import DatasetSchema, with_run

if TYPE_CHECKING:
    from engine.env.base import EnvBase

__all__ = ["module_datasets"]


def module_datasets(modules: Iterable[type[EnvBase]]) -> list[DatasetSchema]:
    """Every dataset ``modules`` declare, in order, each with the ``run`` column first.

    Raises:
        StorageError: a module declares a ``run`` column itself (the engine adds it).
    """
    return [with_run(schema) for module in modules for schema in module.replay_datasets()]
