"""The API's routers, one module per concern: ``experiments`` (submit, watch, cancel, resume, delete), ``events`` (live progress), ``results`` (datasets, downloads), ``health``."""

__all__: list[str] = []
