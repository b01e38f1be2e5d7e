"""The society's side of the fidelity tiers: the tier batches' task, and the token telemetry of every tick."""

__all__: list[str] = []
