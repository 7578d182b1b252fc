"""The one fake GitHub for all tests: a real HTTP server on 127.0.0.1 that PyGithub talks to via base_url.

    fake = FakeGitHub.start()          # or the `fake_github` pytest fixture
    fake.base_url, fake.state, fake.requests, fake.faults
    fake.settings()                    # a bot.settings.GitHubSettings pointing at it
    fake.stop()

Seeded with one repository (`fake.repo`), the bot user (`fake.bot_login`, token
`fake.token`), a human (`fake.human`, token `fake.human_token`).
"""
from __future__ import annotations

import threading
from typing import Any

from tests.fakegithub.faults import Fault, Faults
from tests.fakegithub.server import FakeServer, Request, RequestLog
from tests.fakegithub.state import Comment, FakeState, Issue

__all__ = ["FakeGitHub", "FakeState", "Faults", "Fault", "Request", "RequestLog", "Issue", "Comment"]


class FakeGitHub:
    """A running fake: base_url, state, requests, faults."""

    repo = "octo/models"
    bot_login = "flagsweep-bot"
    token = "ghp_fake_bot_token"
    human = "alice"
    human_token = "ghp_fake_alice_token"

    def __init__(self) -> None:
        self.state = FakeState()
        self.faults = Faults()
        self.requests = RequestLog()
        self.state.add_repo(self.repo)
        self.state.add_user(self.bot_login, token=self.token)
        self.state.add_user(self.human, token=self.human_token)
        self._server = FakeServer(self.state, self.faults, self.requests)
        self.base_url = self._server.base_url
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fakegithub", daemon=True)

    @classmethod
    def start(cls) -> "FakeGitHub":
        """Create and start serving."""
        fake = cls()
        fake._thread.start()
        return fake

    def stop(self) -> None:
        """Shut the server down."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def settings(self, **overrides: Any) -> Any:
        """GitHubSettings for the bot against this fake: no throttling, short waits."""
        from bot.settings import GitHubSettings
        values = dict(repo=self.repo, base_url=self.base_url, token=self.token, bot_login=self.bot_login,
                      mutation_interval=0.0, max_retries=3, max_wait=5.0)
        values.update(overrides)
        return GitHubSettings(**values)

    def client(self, token: str | None = None, **kwargs: Any) -> Any:
        """A plain PyGithub client on this fake (tests of the fake itself; no throttle, no retry)."""
        import github
        kwargs.setdefault("retry", None)
        return github.Github(auth=github.Auth.Token(token or self.token), base_url=self.base_url,
                             seconds_between_requests=0, seconds_between_writes=0, **kwargs)
