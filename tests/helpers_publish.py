"""Settings for publishing to the fake GitHub."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.settings import IssueSettings, Settings, VerifySettings
from tests.fakegithub import FakeGitHub


def make_settings(fake: FakeGitHub, tmp: Path, **gh: Any) -> Settings:
    # min_models=1: one-model signatures are filed at once here (the evidence rule: test_filing.py)
    return Settings(state_path=tmp / "state.sqlite", github=fake.settings(retry_backoff=0.0, **gh),
                    issues=IssueSettings(verify_nightlies=2, min_models=1), verify=VerifySettings(enabled=False))
