"""The API's routers: ``experiments`` (submit, watch, download) and ``health``."""

__all__: list[str] = []
