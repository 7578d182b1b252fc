"""Shared pytest fixtures. `fake_github`: the one fake GitHub server (tests/fakegithub); the session's real runs
that more than one file asserts on (`real_mimi_crash`, `transformers_scan`).

Under pytest-xdist (`make test`: `-n 2`) a module- or session-scoped fixture is made once per worker that runs a test
needing it, and the default `load` schedule spreads a module's tests over both workers: each real sweep such a
fixture holds ran twice. So the tests that share one of our wider fixtures, directly or through another test that
shares one with them, are one `xdist_group`, and `-n` runs under `loadgroup` (`load` for every other test).
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

import pytest

from tests.fakegithub import FakeGitHub

SHARED_SCOPES = {"class", "module", "package", "session"}


def pytest_configure(config: pytest.Config) -> None:
    """`-n N` alone means xdist's `load`; make it `loadgroup`, which is `load` for a test in no group."""
    if config.getoption("dist", "no") == "load":
        config.option.dist = "loadgroup"


@pytest.hookimpl(tryfirst=True)      # before xdist's own hook reads the marks into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that share one of our module- or session-scoped fixtures (transitively) form one xdist group."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    keys = {item: shared_fixtures(item) for item in items}
    for found in keys.values():
        for key in found[1:]:
            parent[root(key)] = root(found[0])
    for item, found in keys.items():
        if found:
            item.add_marker(pytest.mark.xdist_group(root(found[0])))


def shared_fixtures(item: pytest.Item) -> list[str]:
    """The item's fixtures, defined under tests/, that live longer than a test: `where::name`, sorted."""
    if not isinstance(item, pytest.Function):
        return []
    defs: Iterable = (d for ds in item._fixtureinfo.name2fixturedefs.values() for d in ds)    # pytest's own record
    return sorted({f"{d.baseid}::{d.argname}" for d in defs
                   if d.scope in SHARED_SCOPES and d.baseid.startswith("tests")})


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A fresh fake GitHub over real HTTP on 127.0.0.1; `.base_url`, `.state`, `.requests`, `.faults`."""
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
