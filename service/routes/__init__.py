"""The API's routers, one module per concern: ``experiments`` (submit, watch, cancel), ``results`` (datasets, downloads),
``health``, ``metrics`` (Prometheus) and ``docs`` (offline Swagger UI and ReDoc, ``/`` redirecting to them)."""

__all__: list[str] = []
