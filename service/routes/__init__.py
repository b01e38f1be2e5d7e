"""The API's routers, one module per concern: ``experiments`` (submit, watch, cancel, resume, delete), ``events``
(live progress), ``results`` (datasets, downloads), ``sql`` (read-only queries), ``steps`` (steps on a stored run), ``agents`` (one agent's memory per step),
``health``, ``metrics`` (Prometheus) and ``docs`` (offline Swagger UI and ReDoc, ``/`` redirecting to them)."""

__all__: list[str] = []
