"""Built-in environment modules."""

from engine.env.modules.messaging import MessagingSpace

__all__ = ["MessagingSpace"]
