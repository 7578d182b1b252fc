"""The fake GitHub's HTTP side: a stdlib threaded server speaking the REST shapes PyGithub 2.10 reads.

Routes are (method, regex over the raw path) → handler. The raw path is split
on "/" before percent-decoding, so a label name "area/x" sent unencoded is two
segments and 404s, exactly the trap GitHub sets for PyGithub's
remove_from_labels.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from tests.fakegithub import search as search_mod
from tests.fakegithub.faults import Faults
from tests.fakegithub.shapes import Shapes
from tests.fakegithub.state import REACTIONS, ROLE_TO_PERMISSION, Comment, FakeState, Issue, Reaction, Repo, iso

WRITE_METHODS = ("POST", "PATCH", "PUT", "DELETE")
_JWT_ROUTES = ("get_app", "post_access_token")  # the only resources an App's JWT may use
MAX_BODY, MAX_TITLE = 65536, 256


@dataclass
class Request:
    """One request as the fake saw it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    login: str | None
    status: int = 0
    fault: str | None = None

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS


class RequestLog(list):
    """Every request, in order; helpers count reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def writes(self) -> list[Request]:
        """Mutating requests that reached the state (faults that stored nothing excluded)."""
        return [r for r in list(self) if r.is_write and r.status < 400 and r.fault in (None, "drop", "slow")]

    def reads(self) -> list[Request]:
        """GET requests."""
        return [r for r in list(self) if r.method == "GET"]

    def matching(self, method: str, pattern: str) -> list[Request]:
        """Requests with `method` whose path matches the regex `pattern`."""
        return [r for r in list(self) if r.method == method and re.search(pattern, r.path)]


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass
class Reply:
    status: int
    data: Any
    headers: dict[str, str] = field(default_factory=dict)


Route = tuple[str, "re.Pattern[str]", Callable[..., Reply]]


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: FakeState, faults: Faults, log: RequestLog) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state, self.faults, self.log = state, faults, log
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}"
        self.api = Api(self)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:   # keep test output quiet
        return

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

    def _handle(self) -> None:
        srv = self.server
        raw_path, _, raw_query = self.path.partition("?")
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(raw_query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = None
        login = srv.api.authenticate(self.headers.get("Authorization"))
        entry = Request(self.command, raw_path, query, body, login if isinstance(login, str) else None)
        with srv.log.lock:
            srv.log.append(entry)
        fault = srv.faults.take(self.command, raw_path, ("status", "secondary", "primary"))
        if fault is not None:
            entry.fault = fault.kind
            reply = srv.api.fault_reply(fault)
        else:
            try:
                if isinstance(login, HttpError):
                    raise login
                reply = srv.api.dispatch(self.command, raw_path, query, body, login)
            except HttpError as exc:
                reply = Reply(exc.status, {"message": exc.message, "documentation_url": "https://docs.github.com/rest"},
                              exc.headers)
        entry.status = reply.status
        after = srv.faults.take(self.command, raw_path, ("drop", "slow"))
        if after is not None:
            entry.fault = after.kind
            if after.kind == "drop":
                # The write is already stored; the client never hears back.
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            time.sleep(after.delay)
        etag = None
        payload = b""
        if reply.data is not None:
            payload = json.dumps(reply.data).encode()
            etag = '"' + hashlib.sha1(payload).hexdigest() + '"'
            if self.command == "GET" and reply.status == 200 and self.headers.get("If-None-Match") == etag:
                reply, payload = Reply(304, None, reply.headers), b""
                entry.status = 304
        self.send_response(reply.status)
        headers = srv.api.rate_headers(entry.login, raw_path)
        headers.update(reply.headers)
        if etag:
            headers["ETag"] = etag
        if payload:
            headers["Content-Type"] = "application/json; charset=utf-8"
        headers["Content-Length"] = str(len(payload))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if payload:
            self.wfile.write(payload)


def _seg(value: str) -> str:
    return urllib.parse.unquote(value)


class Api(Shapes):
    """Route table and handlers; each returns a Reply or raises HttpError."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.state = server.state
        R = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table = [
            ("GET", r"/user", self.get_user),
            ("GET", r"/users/(?P<who>[^/]+)", self.get_named_user),
            ("GET", r"/rate_limit", self.get_rate_limit),
            ("GET", r"/app", self.get_app),
            ("POST", r"/app/installations/(?P<iid>\d+)/access_tokens", self.post_access_token),
            ("GET", r"/search/issues", self.search_issues),
            ("GET", R, self.get_repo),
            ("GET", R + r"/issues", self.list_issues),
            ("POST", R + r"/issues", self.create_issue),
            ("GET", R + r"/issues/comments/(?P<cid>\d+)", self.get_comment),
            ("PATCH", R + r"/issues/comments/(?P<cid>\d+)", self.edit_comment),
            ("DELETE", R + r"/issues/comments/(?P<cid>\d+)", self.delete_comment),
            ("GET", R + r"/issues/comments/(?P<cid>\d+)/reactions", self.list_comment_reactions),
            ("POST", R + r"/issues/comments/(?P<cid>\d+)/reactions", self.react_comment),
            ("GET", R + r"/issues/(?P<num>\d+)", self.get_issue),
            ("PATCH", R + r"/issues/(?P<num>\d+)", self.edit_issue),
            ("GET", R + r"/issues/(?P<num>\d+)/comments", self.list_comments),
            ("POST", R + r"/issues/(?P<num>\d+)/comments", self.create_comment),
            ("GET", R + r"/issues/(?P<num>\d+)/reactions", self.list_issue_reactions),
            ("POST", R + r"/issues/(?P<num>\d+)/reactions", self.react_issue),
            ("GET", R + r"/issues/(?P<num>\d+)/labels", self.list_issue_labels),
            ("POST", R + r"/issues/(?P<num>\d+)/labels", self.add_issue_labels),
            ("PUT", R + r"/issues/(?P<num>\d+)/labels", self.set_issue_labels),
            ("DELETE", R + r"/issues/(?P<num>\d+)/labels", self.clear_issue_labels),
            ("DELETE", R + r"/issues/(?P<num>\d+)/labels/(?P<name>[^/]+)", self.remove_issue_label),
            ("GET", R + r"/labels", self.list_labels),
            ("POST", R + r"/labels", self.create_label),
            ("GET", R + r"/labels/(?P<name>[^/]+)", self.get_label),
            ("GET", R + r"/collaborators/(?P<who>[^/]+)/permission", self.get_permission),
            ("GET", R + r"/compare/(?P<basehead>[^/]+)", self.compare),
            ("GET", R + r"/commits/(?P<sha>[0-9a-fA-F]+)", self.get_commit),
        ]
        self.routes: list[Route] = [(m, re.compile("^" + p + "/?$"), fn) for m, p, fn in table]

    # -- plumbing --------------------------------------------------------
    def authenticate(self, header: str | None) -> str | dict | HttpError | None:
        """Login for a token, an app dict for a JWT, None when anonymous, HttpError when bad."""
        if not header:
            return None
        scheme, _, cred = header.partition(" ")
        cred = cred.strip()
        if scheme.lower() in ("token", "bearer") and cred in self.state.tokens:
            return self.state.tokens[cred]
        if scheme.lower() == "bearer" and cred.count(".") == 2:
            try:
                claims = json.loads(base64.urlsafe_b64decode(cred.split(".")[1] + "=="))
                app = self.state.apps[int(claims["iss"])]
            except (ValueError, KeyError, TypeError):
                return HttpError(401, "A JSON web token could not be decoded")
            return {"app": int(claims["iss"]), **app}
        return HttpError(401, "Bad credentials")

    def dispatch(self, method: str, raw_path: str, query: dict[str, str], body: Any, login: Any) -> Reply:
        path_found = False
        for m, pattern, fn in self.routes:
            match = pattern.match(raw_path)
            if match:
                path_found = True
                if m == method:
                    args = {k: _seg(v) for k, v in match.groupdict().items()}
                    if isinstance(login, dict) and fn.__name__ not in _JWT_ROUTES:
                        raise HttpError(403, "A JSON web token cannot be used for this resource")
                    if method in WRITE_METHODS and not isinstance(login, (str, dict)):
                        raise HttpError(401, "Requires authentication")
                    with self.state.lock:
                        return fn(query=query, body=body, login=login, **args)
        raise HttpError(405 if path_found else 404, "Not Found")

    def fault_reply(self, fault: Any) -> Reply:
        if fault.kind == "secondary":
            headers = {} if fault.retry_after is None else {"Retry-After": str(int(fault.retry_after))}
            return Reply(403, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}, headers)
        if fault.kind == "primary":
            headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time() + fault.retry_after))}
            return Reply(403, {"message": "API rate limit exceeded"}, headers)
        return Reply(fault.status, {"message": "Server Error"})

    def rate_headers(self, login: str | None, path: str) -> dict[str, str]:
        resource = "search" if path.startswith("/search") else "core"
        limit = 30 if resource == "search" else self.state.rate_limit
        with self.state.lock:
            key = f"{login}:{resource}"
            self.state.used[key] = self.state.used.get(key, 0) + 1
            used = self.state.used[key]
        return {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(max(0, limit - used)),
                "X-RateLimit-Used": str(used), "X-RateLimit-Reset": str(int(time.time()) + 3600),
                "X-RateLimit-Resource": resource}

    def url(self, path: str) -> str:
        return self.server.base_url + path

    def repo(self, owner: str, repo: str) -> Repo:
        try:
            return self.state.repo(f"{owner}/{repo}")
        except KeyError:
            raise HttpError(404, "Not Found") from None

    def issue(self, repo: Repo, num: str) -> Issue:
        issue = repo.issues.get(int(num))
        if issue is None:
            raise HttpError(404, "Not Found")
        return issue

    def comment(self, repo: Repo, cid: str) -> Comment:
        comment = repo.comments.get(int(cid))
        if comment is None:
            raise HttpError(404, "Not Found")
        return comment

    def paginate(self, items: list[Any], query: dict[str, str], path: str) -> Reply:
        per_page = max(1, min(100, int(query.get("per_page", 30))))
        page = max(1, int(query.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        for rel, number in (("next", page + 1), ("last", last)) if page < last else ():
            q = dict(query, page=str(number), per_page=str(per_page))
            links.append(f'<{self.url(path)}?{urllib.parse.urlencode(q)}>; rel="{rel}"')
        if page > 1:
            q = dict(query, page=str(page - 1), per_page=str(per_page))
            links.append(f'<{self.url(path)}?{urllib.parse.urlencode(q)}>; rel="prev"')
        return Reply(200, chunk, {"Link": ", ".join(links)} if links else {})

    # -- users, limits, apps ---------------------------------------------
    def get_user(self, *, query: Any, body: Any, login: Any) -> Reply:
        if not isinstance(login, str):
            raise HttpError(401 if login is None else 403, "Requires authentication")
        if self.state.users.get(login, {}).get("type") == "Bot":
            # Installation tokens cannot read /user on GitHub either.
            raise HttpError(403, "Resource not accessible by integration")
        return Reply(200, self.user_json(login))

    def get_named_user(self, *, query: Any, body: Any, login: Any, **kw: str) -> Reply:
        name = kw["who"]
        if name not in self.state.users:
            raise HttpError(404, "Not Found")
        return Reply(200, self.user_json(name))

    def get_rate_limit(self, *, query: Any, body: Any, login: Any) -> Reply:
        reset = int(time.time()) + 3600
        def res(name: str, limit: int) -> dict[str, int]:
            used = self.state.used.get(f"{login}:{name}", 0)
            return {"limit": limit, "remaining": max(0, limit - used), "reset": reset, "used": used}
        core = res("core", self.state.rate_limit)
        return Reply(200, {"resources": {"core": core, "search": res("search", 30)}, "rate": core})

    def get_app(self, *, query: Any, body: Any, login: Any) -> Reply:
        """GET /app: the authenticated App, as GitHub shows it (a JWT only, like GitHub)."""
        if not isinstance(login, dict):
            raise HttpError(401, "A JSON web token is required to access this endpoint.")
        owner = self.user_json(self.state.apps[login["app"]].get("owner", "octo"))
        slug = login["slug"]
        return Reply(200, {"id": login["app"], "slug": slug, "node_id": f"A_{login['app']}", "client_id": f"Iv1.{slug}",
                           "owner": owner, "name": slug, "description": "", "external_url": "https://github.example",
                           "html_url": f"https://github.example/apps/{slug}", "created_at": iso(0),
                           "updated_at": iso(0), "permissions": {"issues": "write", "metadata": "read"},
                           "events": ["issue_comment"], "installations_count": len(login["installations"])})

    def post_access_token(self, *, query: Any, body: Any, login: Any, iid: str) -> Reply:
        if not isinstance(login, dict):
            raise HttpError(401, "A JSON web token is required")
        if int(iid) not in login["installations"]:
            raise HttpError(404, "Not Found")
        token = f"ghs_{self.state.next_id()}"
        self.state.tokens[token] = login["login"]
        return Reply(201, {"token": token, "expires_at": iso(time.time() + 3600), "permissions": {"issues": "write"},
                           "repository_selection": "selected"})

    # -- repos and issues ------------------------------------------------
    def get_repo(self, *, query: Any, body: Any, login: Any, owner: str, repo: str) -> Reply:
        r = self.repo(owner, repo)
        return Reply(200, {"id": r.id, "name": r.name, "full_name": r.full_name, "owner": self.user_json(r.owner),
                           "private": False, "url": self.url(f"/repos/{r.full_name}"),
                           "html_url": f"https://github.example/{r.full_name}", "has_issues": True,
                           "issues_url": self.url(f"/repos/{r.full_name}/issues{{/number}}")})

    def list_issues(self, *, query: dict[str, str], body: Any, login: Any, owner: str, repo: str) -> Reply:
        r = self.repo(owner, repo)
        state = query.get("state", "open")
        items = [i for i in r.issues.values() if state == "all" or i.state == state]
        if query.get("creator"):
            items = [i for i in items if i.user.lower() == query["creator"].lower()]
        if query.get("labels"):
            wanted = set(query["labels"].split(","))
            items = [i for i in items if wanted <= set(i.labels)]
        key = "updated" if query.get("sort") == "updated" else "created"
        items.sort(key=lambda i: (getattr(i, key), i.number), reverse=query.get("direction", "desc") == "desc")
        reply = self.paginate(items, query, f"/repos/{r.full_name}/issues")
        reply.data = [self.issue_json(r, i) for i in reply.data]
        return reply

    def _check_text(self, title: Any, text: Any) -> None:
        if title is not None and (not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE):
            raise HttpError(422, "Validation Failed: title is invalid or longer than 256 characters")
        if text is not None and len(text) > MAX_BODY:
            raise HttpError(422, "Validation Failed: body is too long (maximum is 65536 characters)")

    def create_issue(self, *, query: Any, body: dict, login: str, owner: str, repo: str) -> Reply:
        r = self.repo(owner, repo)
        body = body or {}
        self._check_text(body.get("title"), body.get("body"))
        if body.get("title") is None:
            raise HttpError(422, "Validation Failed: title is missing")
        issue = self.state.create_issue(r.full_name, body["title"], body.get("body") or "", user=login,
                                        labels=[l if isinstance(l, str) else l["name"] for l in body.get("labels", [])])
        return Reply(201, self.issue_json(r, issue))

    def get_issue(self, *, query: Any, body: Any, login: Any, owner: str, repo: str, num: str) -> Reply:
        r = self.repo(owner, repo)
        return Reply(200, self.issue_json(r, self.issue(r, num)))

    def edit_issue(self, *, query: Any, body: dict, login: str, owner: str, repo: str, num: str) -> Reply:
        r = self.repo(owner, repo)
        issue = self.issue(r, num)
        body = body or {}
        self._check_text(body.get("title"), body.get("body"))
        if "title" in body:
            issue.title = body["title"]
        if "body" in body:
            issue.body = body["body"] or ""
        if "labels" in body:
            issue.labels = list(dict.fromkeys(l if isinstance(l, str) else l["name"] for l in body["labels"]))
            for name in issue.labels:
                self.state.ensure_label(r, name)
        if body.get("state") in ("open", "closed") and body["state"] != issue.state:
            issue.state = body["state"]
            if issue.state == "closed":
                issue.closed, issue.closed_by = time.time(), login
                issue.state_reason = body.get("state_reason") or "completed"
            else:
                issue.closed, issue.closed_by, issue.state_reason = None, None, "reopened"
        elif "state_reason" in body and issue.state == "closed":
            issue.state_reason = body["state_reason"]
        issue.updated = time.time()
        return Reply(200, self.issue_json(r, issue))

    # -- comments --------------------------------------------------------
    def list_comments(self, *, query: dict[str, str], body: Any, login: Any, owner: str, repo: str, num: str) -> Reply:
        r = self.repo(owner, repo)
        issue = self.issue(r, num)
        reply = self.paginate([r.comments[c] for c in issue.comments], query, f"/repos/{r.full_name}/issues/{num}/comments")
        reply.data = [self.comment_json(r, c) for c in reply.data]
        return reply

    def create_comment(self, *, query: Any, body: dict, login: str, owner: str, repo: str, num: str) -> Reply:
        r = self.repo(owner, repo)
        issue = self.issue(r, num)
        text = (body or {}).get("body")
        if not text:
            raise HttpError(422, "Validation Failed: body is missing")
        self._check_text(None, text)
        return Reply(201, self.comment_json(r, self.state.add_comment(r.full_name, issue.number, text, user=login)))

    def get_comment(self, *, query: Any, body: Any, login: Any, owner: str, repo: str, cid: str) -> Reply:
        r = self.repo(owner, repo)
        return Reply(200, self.comment_json(r, self.comment(r, cid)))

    def edit_comment(self, *, query: Any, body: dict, login: str, owner: str, repo: str, cid: str) -> Reply:
        r = self.repo(owner, repo)
        comment = self.comment(r, cid)
        text = (body or {}).get("body")
        if not text:
            raise HttpError(422, "Validation Failed: body is missing")
        self._check_text(None, text)
        comment.body, comment.updated = text, time.time()
        return Reply(200, self.comment_json(r, comment))

    def delete_comment(self, *, query: Any, body: Any, login: str, owner: str, repo: str, cid: str) -> Reply:
        r = self.repo(owner, repo)
        comment = self.comment(r, cid)
        del r.comments[comment.id]
        r.issues[comment.issue].comments.remove(comment.id)
        return Reply(204, None)

    # -- reactions -------------------------------------------------------
    def _react(self, reactions: list[Reaction], body: dict, login: str) -> Reply:
        content = (body or {}).get("content")
        if content not in REACTIONS:
            raise HttpError(422, f"Validation Failed: content {content!r} is not a reaction")
        for reaction in reactions:
            if reaction.user == login and reaction.content == content:
                return Reply(200, self.reaction_json(reaction))   # GitHub answers 200 for a repeat
        reaction = Reaction(self.state.next_id(), content, login, time.time())
        reactions.append(reaction)
        return Reply(201, self.reaction_json(reaction))

    def react_comment(self, *, query: Any, body: dict, login: str, owner: str, repo: str, cid: str) -> Reply:
        return self._react(self.comment(self.repo(owner, repo), cid).reactions, body, login)

    def react_issue(self, *, query: Any, body: dict, login: str, owner: str, repo: str, num: str) -> Reply:
        return self._react(self.issue(self.repo(owner, repo), num).reactions, body, login)

    def list_comment_reactions(self, *, query: dict[str, str], body: Any, login: Any, owner: str, repo: str, cid: str) -> Reply:
        r = self.repo(owner, repo)
        reply = self.paginate(self.comment(r, cid).reactions, query, f"/repos/{r.full_name}/issues/comments/{cid}/reactions")
        reply.data = [self.reaction_json(x) for x in reply.data]
        return reply

    def list_issue_reactions(self, *, query: dict[str, str], body: Any, login: Any, owner: str, repo: str, num: str) -> Reply:
        r = self.repo(owner, repo)
        reply = self.paginate(self.issue(r, num).reactions, query, f"/repos/{r.full_name}/issues/{num}/reactions")
        reply.data = [self.reaction_json(x) for x in reply.data]
        return reply

    # -- labels ----------------------------------------------------------
    @staticmethod
    def _label_names(body: Any) -> list[str]:
        if isinstance(body, dict):
            body = body.get("labels", [])
        return [l if isinstance(l, str) else l["name"] for l in body or []]

    def list_issue_labels(self, *, query: dict[str, str], body: Any, login: Any, owner: str, repo: str, num: str) -> Reply:
        r = self.repo(owner, repo)
        return Reply(200, [self.label_json(r, n) for n in self.issue(r, num).labels])

    def add_issue_labels(self, *, query: Any, body: Any, login: str, owner: str, repo: str, num: str) -> Reply:
        r = self.repo(owner, repo)
        issue = self.issue(r, num)
        issue.labels = list(dict.fromkeys(issue.labels + self._label_names(body)))
        return Reply(200, [self.label_json(r, n) for n in issue.labels])

    def set_issue_labels(self, *, query: Any, body: Any, login: str, owner: str, repo: str, num: str) -> Reply:
        r = self.repo(owner, repo)
        issue = self.issue(r, num)
        issue.labels = list(dict.fromkeys(self._label_names(body)))
        return Reply(200, [self.label_json(r, n) for n in issue.labels])

    def clear_issue_labels(self, *, query: Any, body: Any, login: str, owner: str, repo: str, num: str) -> Reply:
        self.issue(self.repo(owner, repo), num).labels = []
        return Reply(204, None)

    def remove_issue_label(self, *, query: Any, body: Any, login: str, owner: str, repo: str, num: str, name: str) -> Reply:
        r = self.repo(owner, repo)
        issue = self.issue(r, num)
        if name not in issue.labels:
            raise HttpError(404, "Label does not exist")
        issue.labels.remove(name)
        return Reply(200, [self.label_json(r, n) for n in issue.labels])

    def list_labels(self, *, query: dict[str, str], body: Any, login: Any, owner: str, repo: str) -> Reply:
        r = self.repo(owner, repo)
        reply = self.paginate(sorted(r.labels), query, f"/repos/{r.full_name}/labels")
        reply.data = [self.label_json(r, n) for n in reply.data]
        return reply

    def create_label(self, *, query: Any, body: dict, login: str, owner: str, repo: str) -> Reply:
        r = self.repo(owner, repo)
        name = (body or {}).get("name")
        if not name:
            raise HttpError(422, "Validation Failed: name is missing")
        if name in r.labels:
            raise HttpError(422, "Validation Failed: already_exists")
        meta = self.state.ensure_label(r, name)
        meta["color"] = body.get("color", meta["color"])
        meta["description"] = body.get("description")
        return Reply(201, self.label_json(r, name))

    def get_label(self, *, query: Any, body: Any, login: Any, owner: str, repo: str, name: str) -> Reply:
        r = self.repo(owner, repo)
        if name not in r.labels:
            raise HttpError(404, "Not Found")
        return Reply(200, self.label_json(r, name))

    # -- permissions and search ------------------------------------------
    def get_permission(self, *, query: Any, body: Any, login: Any, owner: str, repo: str, **kw: str) -> Reply:
        r = self.repo(owner, repo)
        who = kw["who"]
        if who not in self.state.users:
            raise HttpError(404, "Not Found")
        role = "admin" if who == r.owner else r.roles.get(who, "none")
        return Reply(200, {"permission": ROLE_TO_PERMISSION[role], "role_name": role, "user": self.user_json(who)})

    # -- commits -------------------------------------------------------------
    def _history(self, repo: Repo, base: str, head: str) -> list[Any]:
        """The commits after `base` up to `head`, oldest first (404 for a sha the repository lacks)."""
        if base not in repo.commits or head not in repo.commits:
            raise HttpError(404, "No common ancestor between base and head.")
        chain, sha = [], head
        while sha is not None and sha != base:
            chain.append(repo.commits[sha])
            sha = repo.commits[sha].parent
        if sha is None:
            raise HttpError(404, "No common ancestor between base and head.")
        return chain[::-1]

    def compare(self, *, query: dict[str, str], body: Any, login: Any, owner: str, repo: str, basehead: str) -> Reply:
        """GitHub's compare: the comparison's fields and one page of its commits (paged with Link, at most 1000)."""
        r = self.repo(owner, repo)
        base, _, head = basehead.partition("...")
        chain = self._history(r, base, head)
        page = self.paginate([self.commit_json(r, c, files=False) for c in chain], query,
                             f"/repos/{r.full_name}/compare/{basehead}")
        url = self.url(f"/repos/{r.full_name}/compare/{basehead}")
        data = {"url": url, "html_url": url, "status": "ahead" if chain else "identical", "ahead_by": len(chain),
                "behind_by": 0, "total_commits": len(chain), "commits": page.data, "files": [],
                "base_commit": self.commit_json(r, r.commits[base], files=False),
                "merge_base_commit": self.commit_json(r, r.commits[base], files=False)}
        return Reply(200, data, page.headers)

    def get_commit(self, *, query: Any, body: Any, login: Any, owner: str, repo: str, sha: str) -> Reply:
        r = self.repo(owner, repo)
        if sha not in r.commits:
            raise HttpError(422, f"No commit found for SHA: {sha}")
        return Reply(200, self.commit_json(r, r.commits[sha], files=True))

    def search_issues(self, *, query: dict[str, str], body: Any, login: Any) -> Reply:
        q = query.get("q", "")
        if not q.strip():
            raise HttpError(422, "Validation Failed: q is missing")
        found = search_mod.search_issues(self.state, q)
        reply = self.paginate(found, query, "/search/issues")
        reply.data = {"total_count": len(found), "incomplete_results": False,
                      "items": [dict(self.issue_json(self.state.repo(name), i), score=1.0) for name, i in reply.data]}
        return reply
