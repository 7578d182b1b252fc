"""The GitHub publisher: the only module that imports PyGithub.

Waiting is owned here, not by PyGithub: the client is built with `retry=None`
and no throttle, because PyGithub's default retry re-sends POSTs after a lost
answer (two comments, no error) and sleeps on secondary rate limits without a
cap. Our loop retries 5xx and dropped connections with doubling backoff,
honours `Retry-After` and `X-RateLimit-Reset` up to `max_wait`, spaces writes by
`mutation_interval`, and — after any failure that may have reached GitHub —
looks for the write (by marker) before sending it again. When GitHub stays
down it raises GitHubUnavailable and the caller leaves the rest in the outbox.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import github
import requests
from github import Auth, Github, GithubException

from bot.text import markdown
from bot.github.port import ActionRefused, GitHubUnavailable, IdentityError, IssueRef, Publisher, check_identity
from bot.settings import GitHubSettings
from harness.core.commits import CHANGES, Commit, CommitError, FileChange, commit as make_commit, noreply_login

__all__ = ["ActionRefused", "GitHubPublisher", "GitHubUnavailable", "IdentityError", "IssueRef", "Publisher"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def _auth(settings: GitHubSettings) -> Auth.Auth:
    if settings.token:
        return Auth.Token(settings.token)
    key = settings.private_key or (Path(settings.private_key_path).read_text() if settings.private_key_path else None)
    if not (settings.app_id and key and settings.installation_id):
        raise ActionRefused("no GitHub credentials: set a token, or app_id + private key + installation_id")
    return Auth.AppAuth(settings.app_id, key).get_installation_auth(settings.installation_id)


# (base_url, token, app_id, installation_id) -> login: asked of GitHub once per process.
_LOGINS: dict[tuple[Any, ...], str] = {}


def _ask_login(gh: Github, settings: GitHubSettings) -> str:
    """The login the credentials write as: the token's user (GET /user), or the App's `<slug>[bot]` (GET /app)."""
    if settings.token:
        return gh.get_user().login
    key = settings.private_key or Path(settings.private_key_path or "").read_text()
    app = github.GithubIntegration(auth=Auth.AppAuth(settings.app_id, key), base_url=settings.base_url.rstrip("/"),
                                   retry=None, timeout=settings.request_timeout).get_app()
    return f"{app.slug}[bot]"


def _lf(text: str | None) -> str:
    """Body text compared without line-ending differences (GitHub stores what browsers send: CRLF)."""
    return (text or "").replace("\r\n", "\n")


def _rate_wait(exc: GithubException, now: float) -> float | None:
    """Seconds GitHub asks us to wait, or None when this is not a rate limit."""
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    message = str((exc.data or {}).get("message", "")) if isinstance(exc.data, dict) else str(exc.data or "")
    if exc.status not in (403, 429):
        return None
    if "retry-after" in headers:
        try:
            return max(0.0, float(headers["retry-after"]))
        except ValueError:
            return 60.0
    if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
        # The reset header is an epoch second on GitHub's clock; add a second of slack.
        return max(0.0, float(headers["x-ratelimit-reset"]) - now) + 1.0
    if "rate limit" in message.lower() or exc.status == 429:
        return 60.0                      # GitHub's advice for a secondary limit without Retry-After
    return None


class GitHubPublisher:
    """The real publisher, over PyGithub, for one repository."""

    dry_run = False

    def __init__(self, settings: GitHubSettings, *, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        if not settings.repo:
            raise ActionRefused("no repository: set github.repo or pass --repo OWNER/NAME")
        self.settings = settings
        self._sleep, self._clock, self._wall = sleep, clock, wall
        self._last_write: float | None = None
        self.waits: list[tuple[str, float]] = []          # (why, seconds) of every wait, for reports and tests
        self.gh = Github(auth=_auth(settings), base_url=settings.base_url.rstrip("/"), retry=None, lazy=True,
                         per_page=100, timeout=settings.request_timeout, seconds_between_requests=None,
                         seconds_between_writes=None)
        self.repo = self.gh.get_repo(settings.repo)        # lazy: no request
        self.login = self.identity()

    def identity(self) -> str:
        """Who the credentials write as, asked once per process, checked against (or adopted as) bot_login."""
        key = (self.settings.base_url, self.settings.token, self.settings.app_id, self.settings.installation_id)
        if key not in _LOGINS:
            try:
                _LOGINS[key] = self._call("who am I", lambda: _ask_login(self.gh, self.settings), write=False)
            except GitHubUnavailable as exc:
                if getattr(exc.__cause__, "status", None) == 401:   # at start-up, rejected credentials are a refusal
                    raise ActionRefused(str(exc), 401) from None
                raise
        return check_identity(self.settings, _LOGINS[key])

    # -- the one retry loop --------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T], *, write: bool, look: Callable[[], T | None] | None = None,
              uncertain: bool = False) -> T:
        attempts = self.settings.max_retries + 1
        for attempt in range(attempts):
            if uncertain and look is not None:
                found = look()
                if found is not None:
                    log.info("%s: already on GitHub, not sending again", what)
                    return found
            if write:
                self._space_writes()
            try:
                result = fn()
                if write:
                    self._last_write = self._clock()
                return result
            except GithubException as exc:
                wait = _rate_wait(exc, self._wall())
                if exc.status == 401:
                    # Bad or expired credentials fail every action alike: stop and keep them all for later.
                    raise GitHubUnavailable(f"{what}: GitHub rejected the credentials (401)") from exc
                if wait is None and exc.status < 500:
                    raise ActionRefused(f"{what}: GitHub answered {exc.status}: {exc.data}", exc.status) from exc
                why = "rate limit" if wait is not None else f"HTTP {exc.status}"
                if wait is None:
                    wait = self._backoff(attempt)
                    uncertain = uncertain or write       # a 5xx may come after the write was stored
            except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
                why, wait = type(exc).__name__, self._backoff(attempt)
                uncertain = uncertain or write
            if write:
                self._last_write = self._clock()
            if attempt == attempts - 1:
                break
            if wait > self.settings.max_wait:
                raise GitHubUnavailable(f"{what}: GitHub asks to wait {wait:.0f}s (> max_wait {self.settings.max_wait:.0f}s)")
            log.warning("%s: %s, waiting %.1fs (attempt %d of %d)", what, why, wait, attempt + 1, attempts)
            self.waits.append((why, wait))
            self._sleep(wait)
        raise GitHubUnavailable(f"{what}: still failing after {attempts} attempts ({why})")

    def _backoff(self, attempt: int) -> float:
        return min(self.settings.retry_backoff * (2 ** attempt), self.settings.max_wait)

    def _space_writes(self) -> None:
        # GitHub asks integrations for at least a second between mutations.
        if self._last_write is None or self.settings.mutation_interval <= 0:
            return
        left = self._last_write + self.settings.mutation_interval - self._clock()
        if left > 0:
            self.waits.append(("mutation interval", left))
            self._sleep(left)

    # -- reads -----------------------------------------------------------------
    def _ref(self, issue: Any) -> IssueRef:
        body = issue.body or ""
        # state_reason comes with the listing; closed_by does not (touching it would cost a GET per issue).
        return IssueRef(number=issue.number, title=issue.title, body=body, state=issue.state,
                        author=issue.user.login if issue.user else "", key=markdown.marker_key(body),
                        labels=[l.name for l in issue.labels], state_reason=issue.state_reason)

    def list_own_issues(self) -> list[IssueRef]:
        """Every issue the bot filed that carries a marker (one paginated listing: 100 issues a request)."""
        def fetch() -> list[IssueRef]:
            issues = self.repo.get_issues(state="all", creator=self.login, sort="created", direction="asc")
            return [ref for ref in (self._ref(i) for i in issues) if ref.key]
        return self._call("list own issues", fetch, write=False)

    def commit_range(self, source: str, base: str, head: str, most: int) -> list[Commit]:
        """The commits of repository `source` after `base` up to `head`, oldest first, each with its files and what its
        message says: GitHub's compare (paged, 100 a page) and one read per commit for its files. ActionRefused
        naming the count when there are more than `most` (their files are then not read)."""
        def fetch() -> list[Commit]:
            compared = self.gh.get_repo(source).compare(base, head, comparison_commits_per_page=100)
            if compared.total_commits > most:
                raise ActionRefused(f"{compared.total_commits} commits between {base[:12]} and {head[:12]}: more than "
                                    f"[culprit] max_commits = {most}, not searched")
            return [self._commit(c) for c in compared.commits]
        return self._call(f"compare {base[:12]}...{head[:12]}", fetch, write=False)

    def commit_message(self, source: str, sha: str) -> str:
        """One commit's message (a nightly commit's names the main commit it was cut from)."""
        return self._call(f"commit {sha[:12]}", lambda: self.gh.get_repo(source).get_commit(sha).commit.message,
                          write=False)

    def commit_author(self, source: str, sha: str) -> str | None:
        """The GitHub login of a commit's author (None when GitHub ties the commit to no account)."""
        def fetch() -> str | None:
            author = self.gh.get_repo(source).get_commit(sha).author
            return author.login if author is not None else None
        return self._call(f"commit {sha[:12]}", fetch, write=False)

    @staticmethod
    def _commit(c: Any) -> Commit:
        """A listed commit with its files (touching `files` reads the commit: GitHub's compare lists none). Its author's
        login is GitHub's answer, else its noreply address's; the message is foreign text (harness.core.commits
        reads a bounded head of it, alone)."""
        files = tuple(FileChange(f.filename, f.status if f.status in CHANGES else "modified",
                                 f.previous_filename if f.status == "renamed" else None) for f in c.files)
        login = c.author.login if c.author else noreply_login(c.commit.author.email or "") if c.commit.author else None
        try:
            return make_commit(c.sha, c.commit.message or "", login, files,
                               parent=c.parents[0].sha if c.parents else None)
        except CommitError as exc:
            raise ActionRefused(str(exc)) from None

    def paused(self, label: str) -> IssueRef | None:
        """The oldest open issue labelled `label` (anyone's: maintainers pull the switch), or None; one request."""
        def fetch() -> IssueRef | None:
            page = self.repo.get_issues(state="open", labels=[label], sort="created", direction="asc").get_page(0)
            return self._ref(page[0]) if page else None
        return self._call(f"look for the {label!r} label", fetch, write=False)

    def _recent(self, key: str) -> IssueRef | None:
        """The bot's newest issues, checked for the marker (listing is consistent; search lags)."""
        def fetch() -> IssueRef | None:
            page = self.repo.get_issues(state="all", creator=self.login, sort="created", direction="desc").get_page(0)
            for issue in page:
                if markdown.marker_key(issue.body) == key:
                    return self._ref(issue)
            return None
        return self._call(f"look for {key}", fetch, write=False)

    def find_by_marker(self, key: str) -> IssueRef | None:
        """The bot's issue with this marker key: recent listing first, then search (in:body, author: the bot)."""
        found = self._recent(key)
        if found is not None:
            return found
        author = f"app/{self.login[:-5]}" if self.login.endswith("[bot]") else self.login
        query = f'"flagsweep:key={key}"'

        def search() -> IssueRef | None:
            hits = self.gh.search_issues(query, repo=self.settings.repo, author=author, **{"is": "issue", "in": "body"})
            for issue in hits.get_page(0):
                if markdown.marker_key(issue.body) == key:   # a human quoting the marker elsewhere is not ours
                    return self._ref(issue)
            return None
        return self._call(f"search {key}", search, write=False)

    def user_permission(self, login: str) -> str:
        """The user's role name on the repository (`triage` is not folded into `read`); `none` if unknown."""
        def fetch() -> str:
            try:
                return self.repo.get_collaborator_role_name(login)
            except github.UnknownObjectException:
                return "none"
        return self._call(f"permission of {login}", fetch, write=False)

    # -- writes ----------------------------------------------------------------
    def create_issue(self, key: str, title: str, body: str, labels: list[str], *, look: bool = True) -> int:
        """File an issue unless one with this marker exists; returns its number."""
        if markdown.marker_key(body) != key:
            raise ValueError(f"body of {key} lacks its marker")
        find = lambda: (lambda ref: ref.number if ref else None)(self._recent(key))
        return self._call(f"create {key}", lambda: self.repo.create_issue(title=title, body=body, labels=labels).number,
                          write=True, look=find, uncertain=look)

    def edit_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> bool:
        """Rewrite the bot's region of the body (a human's text around it is kept) and the title; False if equal."""
        issue = self._call(f"read #{number}", lambda: self._fresh(number), write=False)
        new_body = markdown.splice(issue.body, body) if body is not None else issue.body
        changes: dict[str, Any] = {}
        if title is not None and title != issue.title:
            changes["title"] = title
        if new_body != (issue.body or ""):
            changes["body"] = new_body
        if not changes:
            return False
        self._call(f"edit #{number}", lambda: self.repo.get_issue(number).edit(**changes), write=True,
                   look=self._looks_like(number, changes))
        return True

    def _looks_like(self, number: int, wanted: dict[str, Any]) -> Callable[[], bool | None]:
        """A look-first check for a PATCH whose answer was lost: True when the issue already reads as `wanted`."""
        def landed() -> bool | None:
            issue = self._fresh(number)
            have = {"title": issue.title, "body": _lf(issue.body), "state": issue.state}
            return True if all(have[k] == (_lf(v) if k == "body" else v) for k, v in wanted.items()
                               if k in have) else None
        return lambda: self._call(f"look at #{number}", landed, write=False)

    def _fresh(self, number: int) -> Any:
        issue = self.repo.get_issue(number)
        issue.body                                   # a lazy issue: touching a field fetches it
        return issue

    def comment(self, number: int, body: str, *, look: bool = False) -> int | None:
        """Post a comment; when it may have been posted already, look for it (by its marker line) first."""
        first_line = body.split("\n", 1)[0]
        keyed = first_line.startswith("<!-- flagsweep:comment=")

        def find() -> int | None:
            for c in self.repo.get_issue(number).get_comments():
                if c.user and c.user.login == self.login and (c.body == body or (keyed and c.body.split("\n", 1)[0] == first_line)):
                    return c.id
            return None
        return self._call(f"comment on #{number}", lambda: self.repo.get_issue(number).create_comment(body).id,
                          write=True, look=lambda: self._call(f"look on #{number}", find, write=False), uncertain=look)

    def close(self, number: int, reason: str = "completed") -> bool:
        """Close; after a lost answer, look whether it is closed before sending again."""
        self._call(f"close #{number}", lambda: self.repo.get_issue(number).edit(state="closed", state_reason=reason),
                   write=True, look=self._looks_like(number, {"state": "closed"}))
        return True

    def reopen(self, number: int) -> bool:
        """Reopen."""
        self._call(f"reopen #{number}", lambda: self.repo.get_issue(number).edit(state="open"), write=True,
                   look=self._looks_like(number, {"state": "open"}))
        return True

    def set_labels(self, number: int, labels: list[str]) -> bool:
        """Replace the labels (PUT: one request, and names with "/" work, unlike remove_from_labels); False if equal."""
        current = self._call(f"read #{number}", lambda: [l.name for l in self._fresh(number).labels], write=False)
        if sorted(set(current)) == sorted(set(labels)):
            return False
        self._call(f"labels #{number}", lambda: self.repo.get_issue(number).set_labels(*labels), write=True)
        return True

    def react(self, comment_id: int, content: str) -> None:
        """React to a comment (how a command is acknowledged); a repeat is harmless on GitHub."""
        url = f"/repos/{self.settings.repo}/issues/comments/{comment_id}/reactions"
        self._call(f"react {content} to comment {comment_id}",
                   lambda: self.gh.requester.requestJsonAndCheck("POST", url, input={"content": content}), write=True)

    def finish(self, extra: dict[str, Any] | None = None) -> Path | None:
        """Nothing to finish: each write reached GitHub when it was made (the dry-run twin writes its plan here)."""
        return None
