"""Shared pytest fixtures. `fake_github`: the one fake GitHub server (tests/fakegithub); the session's real runs
that more than one file asserts on (`real_mimi_crash`, `transformers_scan`)."""
from __future__ import annotations

from typing import Callable, Iterator

import pytest

from tests.fakegithub import FakeGitHub


@pytest.fixture
def fake_github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A fresh fake GitHub over real HTTP on 127.0.0.1; `.base_url`, `.state`, `.requests`, `.faults`. Its identity is
    fresh too: the publisher asks a login once per process by base URL, and an earlier test's fake may have had this
    port."""
    from bot.github import client

    monkeypatch.setattr(client, "_LOGINS", {})
    fake = FakeGitHub.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def register_model() -> Iterator[Callable[[str, str, Callable], None]]:
    """`register_model(name, stratum, builder)`: a test-only zoo model that leaves the global registry after the test."""
    from harness.zoo import registry

    added: list[str] = []

    def register(name: str, stratum: str, builder: Callable) -> None:
        registry.register(name, stratum, builder)
        added.append(name)

    yield register
    for name in added:
        registry.EXTRA.pop(name, None)


@pytest.fixture(scope="session")
def real_mimi_crash(tmp_path_factory):
    """tests/real_mimi_crash.py: one real sweep, verify step and dry-run publish of MimiModel's crash, shared by
    the isolation, maintainer's-script and torch-free publish tests (each used to sweep and verify a crash on its
    own)."""
    from tests.real_mimi_crash import sweep_verify_publish

    return sweep_verify_publish(tmp_path_factory.mktemp("real-mimi-crash"))


@pytest.fixture(scope="session")
def transformers_scan() -> dict:
    """The installed transformers' real scan (every modeling module imported and hashed in a worker: ~40 s of CPU),
    once per session: tests/test_zoo_lock.py and tests/test_cli_paths.py each used to scan on their own, and the
    installed release does not change between tests."""
    from harness.discovery import locker

    return locker.scan()
