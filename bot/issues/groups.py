"""The plain data of one tracking issue: its group (the crashes, or the wrong results, of one signature under one
config; harness.core.tracking) and what its issue should say (bot.issues.tracking, bot.issues.wrong)."""
from __future__ import annotations

from dataclasses import dataclass

from bot.issues.material import BodyHash
from harness.core.correctness import is_wrong_signature
from harness.core.outcome import Effect


@dataclass(frozen=True)
class Group:
    """One tracking group: the crashes (or the wrong results) of one signature under one config."""

    key: str
    config: str
    signature: str
    effects: tuple[Effect, ...]

    @property
    def wrong_result(self) -> bool:
        """A wrong result's group (bot.issues.wrong writes its issue), not a crash's."""
        return is_wrong_signature(self.signature)

    @property
    def models(self) -> list[str]:
        return [e.model for e in self.effects]


@dataclass(frozen=True)
class TrackingIssue:
    """What the tracking issue of one group should say."""

    group: Group
    title: str
    body: str
    labels: list[str]
    models: list[str]            # the crashing (or wrong) models, sorted
    hash: BodyHash
