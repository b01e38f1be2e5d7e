"""Bundled data files of the environment modules (read with ``importlib.resources``)."""

__all__: list[str] = []
