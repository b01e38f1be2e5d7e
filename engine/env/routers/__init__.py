"""Routers selectable in the spec (``environment.router``)."""

from engine.env.routers.react import ReActRouter

__all__ = ["ROUTERS", "ReActRouter"]

ROUTERS = {"react": ReActRouter}
