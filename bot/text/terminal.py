"""Text shown on a terminal, as the bot's text reads it: the rule itself is `harness.core.terminal.visible`, kept in the
core so that the engine's progress bars, below the bot, write through the same rule."""
from __future__ import annotations

from harness.core.terminal import visible

__all__ = ["visible"]
