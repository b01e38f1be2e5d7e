"""The API's routers, one module per concern: ``experiments`` (submit, watch, cancel), ``results`` (datasets, downloads), ``health``."""

__all__: list[str] = []
