"""Whole experiments: one spec end to end (runner), sweeps, the cluster, estimates, preflight, live progress and the verdict."""

__all__: list[str] = []  # import from the modules; engine.society re-exports the public names
