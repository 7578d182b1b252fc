"""The JSON shapes of GitHub's REST answers that PyGithub 2.10 reads (users, labels, issues, comments, reactions).

URLs point back at the fake (PyGithub follows `url` fields for later calls, and
refuses hosts other than its base URL).
"""
from __future__ import annotations

import urllib.parse
from typing import Any

from tests.fakegithub.state import REACTIONS, Comment, FakeCommit, FakeState, Issue, Reaction, Repo, iso


class Shapes:
    """Mixed into the API: needs `self.state` and `self.url(path)`."""

    state: FakeState

    def url(self, path: str) -> str:
        raise NotImplementedError

    def user_json(self, login: str) -> dict[str, Any]:
        user = self.state.users.get(login) or {"login": login, "id": 0, "type": "User"}
        return {"login": user["login"], "id": user["id"], "type": user["type"],
                "url": self.url(f"/users/{urllib.parse.quote(login)}"), "html_url": f"https://github.example/{login}"}

    def label_json(self, repo: Repo, name: str) -> dict[str, Any]:
        meta = self.state.ensure_label(repo, name)
        return {"id": meta["id"], "name": name, "color": meta["color"], "description": meta["description"],
                "default": False, "url": self.url(f"/repos/{repo.full_name}/labels/{urllib.parse.quote(name, safe='')}")}

    def reactions_json(self, reactions: list[Reaction], url: str) -> dict[str, Any]:
        counts = {c: sum(1 for r in reactions if r.content == c) for c in REACTIONS}
        return {"url": url, "total_count": len(reactions), **counts}

    def issue_json(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        url = self.url(f"/repos/{repo.full_name}/issues/{issue.number}")
        return {
            "id": issue.id, "node_id": f"I_{issue.id}", "number": issue.number, "title": issue.title, "body": issue.body,
            "state": issue.state, "state_reason": issue.state_reason, "locked": False,
            "labels": [self.label_json(repo, n) for n in issue.labels], "user": self.user_json(issue.user),
            "assignee": None, "assignees": [], "milestone": None, "comments": len(issue.comments),
            "created_at": iso(issue.created), "updated_at": iso(issue.updated),
            "closed_at": iso(issue.closed) if issue.closed else None,
            "closed_by": self.user_json(issue.closed_by) if issue.closed_by else None,
            "author_association": "OWNER" if issue.user == repo.owner else "NONE",
            "url": url, "html_url": f"https://github.example/{repo.full_name}/issues/{issue.number}",
            "comments_url": url + "/comments", "labels_url": url + "/labels{/name}", "events_url": url + "/events",
            "repository_url": self.url(f"/repos/{repo.full_name}"),
            "reactions": self.reactions_json(issue.reactions, url + "/reactions"),
        }

    def comment_json(self, repo: Repo, comment: Comment) -> dict[str, Any]:
        url = self.url(f"/repos/{repo.full_name}/issues/comments/{comment.id}")
        return {"id": comment.id, "node_id": f"IC_{comment.id}", "body": comment.body, "user": self.user_json(comment.user),
                "created_at": iso(comment.created), "updated_at": iso(comment.updated), "url": url,
                "html_url": f"https://github.example/{repo.full_name}/issues/{comment.issue}#issuecomment-{comment.id}",
                "issue_url": self.url(f"/repos/{repo.full_name}/issues/{comment.issue}"),
                "author_association": "NONE", "reactions": self.reactions_json(comment.reactions, url + "/reactions")}

    def reaction_json(self, reaction: Reaction) -> dict[str, Any]:
        return {"id": reaction.id, "node_id": f"R_{reaction.id}", "content": reaction.content,
                "user": self.user_json(reaction.user), "created_at": iso(reaction.created)}

    def commit_json(self, repo: Repo, commit: FakeCommit, *, files: bool) -> dict[str, Any]:
        """A commit as compare lists it (files=False) or as GET .../commits/SHA answers (files=True)."""
        url = self.url(f"/repos/{repo.full_name}/commits/{commit.sha}")
        person = {"name": commit.author or "someone",
                  "email": commit.email or f"{commit.author or 'someone'}@example.com", "date": iso(commit.date)}
        data: dict[str, Any] = {
            "sha": commit.sha, "node_id": f"C_{commit.sha[:8]}", "url": url,
            "html_url": f"https://github.example/{repo.full_name}/commit/{commit.sha}",
            "commit": {"message": commit.message, "author": person, "committer": person, "url": url},
            "author": self.user_json(commit.author) if commit.author else None, "committer": None,
            "parents": [{"sha": commit.parent, "url": self.url(f"/repos/{repo.full_name}/commits/{commit.parent}")}]
            if commit.parent else []}
        if files:
            data["files"] = [{"sha": "0" * 40, "additions": 1, "deletions": 0, "changes": 1, **f} for f in commit.files]
        return data
