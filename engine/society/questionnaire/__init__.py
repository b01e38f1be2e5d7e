"""Questionnaires: typed questions, answering them in batches on Dask, their prompts."""

__all__: list[str] = []  # import from the modules; engine.society re-exports the public names
