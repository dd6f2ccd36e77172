"""One live conversation: no terminal, no SQL. ``Conversation`` is the facade; its collaborators each have a
module of their own, and ``recorder.py`` is the only writer of the saved session."""

from co_cli.deps import Pin, PinSource
from co_cli.session.conversation import Conversation
from co_cli.session.turn import TurnOutcome, TurnStatus, TurnView, off_loop

__all__ = ["Conversation", "Pin", "PinSource", "TurnOutcome", "TurnStatus", "TurnView", "off_loop"]
