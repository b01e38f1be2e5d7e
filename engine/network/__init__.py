"""Social networks: a spec's layers (:mod:`engine.network.spec`), their edges from files or numpy generators."""

__all__: list[str] = []
