"""Shared pytest fixtures. `fake_github`: the one fake GitHub server (tests/fakegithub)."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.fakegithub import FakeGitHub


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A fresh fake GitHub over real HTTP on 127.0.0.1; `.base_url`, `.state`, `.requests`, `.faults`."""
    fake = FakeGitHub.start()
    try:
        yield fake
    finally:
        fake.stop()
