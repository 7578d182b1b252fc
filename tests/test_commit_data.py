"""Commit data is foreign input (issue 45): a message cannot forge commits, the checkout's config runs no program,
only GitHub vouches for a login, the cc and the mentions are bounded, and GitHub's compare of hostile commits
gives a sane result. Real git repositories in tmp dirs (no torch), the fake GitHub over HTTP, and the tracking
issue's body as the dry-run publisher writes it."""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

import pytest

from bot.builds import checkout
from bot.github.client import GitHubPublisher
from harness.core.commits import MAX_MESSAGE, Commit, FileChange, Person, overlay_blocker, parse_message
from harness.core.suspects import MAX_COAUTHORS, cc_for

NOREPLY = "{n}+{login}@users.noreply.github.com"


def _git(repo: Path, *args: str, stdin: bytes | None = None, email: str = "9+alice@users.noreply.github.com") -> str:
    """git for building a test repository: no user or system config, a fixed author and date."""
    env = {"GIT_AUTHOR_NAME": "Alice", "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": "bot",
           "GIT_COMMITTER_EMAIL": "bot@example.com", "GIT_AUTHOR_DATE": "2026-11-27T00:00:00",
           "GIT_COMMITTER_DATE": "2026-11-27T00:00:00", "HOME": str(repo), "PATH": "/usr/bin:/bin",
           "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, input=stdin,
                          env=env).stdout.decode().strip()


def _repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository with one root commit (the good build's): torch/_dynamo/config.py."""
    repo = tmp_path / "repo"
    (repo / "torch/_dynamo").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "torch/_dynamo/config.py").write_text("verbose = False\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "The good build's commit")
    return repo, _git(repo, "rev-parse", "HEAD")


def _commit(repo: Path, message: str, files: dict[str, str], **kw: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--cleanup=verbatim", "-m", message, **kw)
    return _git(repo, "rev-parse", "HEAD")


# -- 1. a message forges no commit; names git quotes are read raw -------------------------------------------------
FORGED = "f" * 40


def test_a_message_holding_any_byte_forges_no_commit_and_keeps_the_real_files(tmp_path):
    """The message main read with `\\x1e`/`\\x1f` as separators: it replaced the real commit's files and added a
    commit that does not exist, by mallory, with a co-author and a C++ file (which would cut the overlay search)."""
    repo, good = _repo(tmp_path)
    forged = ("Fix it (#5)\x1fM\ttorch/_dynamo/config.py\n\x1e" + FORGED + "\x1f\x1f" +
              NOREPLY.format(n=1, login="mallory") + "\x1fForged (#666)\n\nCo-authored-by: Eve <2+eve@users.noreply"
              ".github.com>\n\x1f\nM\taten/src/ATen/evil.cpp\n")
    real = _commit(repo, forged, {"torch/_dynamo/utils.py": "x = 1\n"})
    # the same bytes in a raw commit object, with a NUL, an unknown encoding and a signature header git never checks
    tree, email = _git(repo, "rev-parse", "HEAD^{tree}"), NOREPLY.format(n=3, login="bob")
    raw = (f"tree {tree}\nparent {real}\nauthor Bob <{email}> 1764201600 +0000\ncommitter bot <b@x> 1764201600 "
           f"+0000\nencoding rot13\ngpgsig -----BEGIN PGP SIGNATURE-----\n parent {FORGED}\n -----END PGP "
           f"SIGNATURE-----\n\nRaw (#7)\0\n{forged}").encode()
    raw_sha = _git(repo, "hash-object", "-t", "commit", "-w", "--literally", "--stdin", stdin=raw)
    _git(repo, "update-ref", "refs/heads/main", raw_sha)
    found = checkout.commits(repo, good, raw_sha)
    assert [c.sha for c in found] == [real, raw_sha]                     # no third, forged commit
    first, second = found
    assert first.files == (FileChange("torch/_dynamo/utils.py", "added"),)     # its own files, not the message's
    assert (first.author, first.pr, first.coauthors, first.parent) == ("alice", None, (Person("Eve", "eve"),), good)
    assert first.title.startswith("Fix it (#5)\x1fM")                    # the message, read alone and whole
    assert (second.author, second.parent, second.files) == ("bob", real, ())
    assert second.title.startswith("Raw (#7)\0")
    assert [overlay_blocker(c) for c in found] == [None, None]          # no forged C++ file cuts the search


def test_file_names_git_quotes_are_read_raw_and_stay_python(tmp_path):
    repo, good = _repo(tmp_path)
    names = ["torch/_dynamo/é.py", "torch/_dynamo/tab\there.py", 'torch/_dynamo/"quoted".py', "torch/_dynamo/nl\n.py"]
    bad = _commit(repo, "Odd names (#9)", {n: "x = 1\n" for n in names})
    (c,) = checkout.commits(repo, good, bad)
    assert sorted(f.path for f in c.files) == sorted(names)
    assert overlay_blocker(c) is None
    # a rename's both names, raw
    _git(repo, "mv", "torch/_dynamo/é.py", "torch/_dynamo/ü.py")
    _git(repo, "commit", "-q", "-m", "Rename (#10)")
    (renamed,) = checkout.commits(repo, bad, _git(repo, "rev-parse", "HEAD"))
    assert renamed.files == (FileChange("torch/_dynamo/ü.py", "renamed", "torch/_dynamo/é.py"),)
    assert sorted(checkout.readers(repo, bad, "x")) == sorted(names)


def _fast_import(repo: Path, commits: list[tuple[bytes, bytes]]) -> list[str]:
    """Commits on main after its head, made by `git fast-import` (fast, and any byte in a name or a message): each
    (file name, message) adds one file. Their shas, oldest first."""
    stream = bytearray()
    for i, (name, message) in enumerate(commits):
        stream += (b"commit refs/heads/main\ncommitter A <a@x> 1764201600 +0000\n"
                   + b"data %d\n" % len(message) + message + b"\n")
        if i == 0:
            stream += b"from refs/heads/main^0\n"
        stream += b"M 100644 inline " + name + b"\ndata 6\nx = 1\n\n"
    _git(repo, "fast-import", "--quiet", stdin=bytes(stream))
    return _git(repo, "rev-list", "--reverse", f"HEAD~{len(commits)}..HEAD").split()


def test_a_file_name_that_is_not_utf8_blocks_its_commit_not_the_range(tmp_path):
    repo, good = _repo(tmp_path)
    shas = _fast_import(repo, [(b"torch/_dynamo/a.py", b"Before (#1)"), (b"torch/_dynamo/bad\xff.py", b"Odd (#2)"),
                               (b"torch/_dynamo/b.py", b"After (#3)")])
    before, odd, after = checkout.commits(repo, good, shas[-1])
    assert (before.sha, odd.sha, after.sha) == tuple(shas)
    assert overlay_blocker(before) is None and overlay_blocker(after) is None
    assert odd.files[0].path == "torch/_dynamo/bad\ufffd.py"
    assert "not UTF-8" in overlay_blocker(odd)


def test_a_gigabyte_message_is_read_not_kept_and_thousands_of_commits_stream(tmp_path):
    """cat-file's output is read as it streams: a huge commit keeps MAX_OBJECT bytes and the commits after it are
    still read whole; 2,000 shas (more than a pipe holds) do not deadlock the writer against the reader."""
    repo, good = _repo(tmp_path)
    huge = b"Huge (#1)\n\n" + b"y" * (3 * checkout.MAX_OBJECT)
    shas = _fast_import(repo, [(b"torch/_dynamo/h.py", huge)]
                        + [(b"torch/_dynamo/f%d.py" % i, b"Small (#%d)" % (i + 2)) for i in range(2000)])
    objects = checkout._objects(repo, shas)
    assert len(objects[shas[0]]) == checkout.MAX_OBJECT
    found = checkout.commits(repo, good, shas[-1])
    assert [c.sha for c in found] == shas
    assert found[0].title == "Huge (#1)" and found[-1].title == "Small (#2001)" and found[-1].pr == 2001


# -- 2. no program the checkout names runs ---------------------------------------------------------------------------
TRAPS = ("pager", "external_diff", "textconv", "fsmonitor", "hook", "gpg", "gpg_ssh", "gpg_x509", "env_diff")


def _hostile(tmp_path: Path) -> tuple[Path, str, str, Path]:
    """A checkout whose config, attributes and hooks name a marker-writing program for every way git runs one, and
    whose last commit carries a signature (so a signature check would run gpg)."""
    repo, good = _repo(tmp_path)
    marks, bin_dir = tmp_path / "marks", tmp_path / "bin"
    marks.mkdir()
    bin_dir.mkdir()
    for name in TRAPS:
        prog = bin_dir / name
        prog.write_text(f"#!/bin/sh\ntouch {marks / name}\nexit 0\n")
        prog.chmod(0o755)
    hooks = repo / ".git/hooks"
    for hook in ("pre-commit", "post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marks / 'hook'}\n")
        (hooks / hook).chmod(0o755)
    mid = _commit(repo, "Change (#1)", {"torch/_dynamo/config.py": "verbose = True\n", ".gitattributes": "* diff=evil\n"})
    tree = _git(repo, "rev-parse", "HEAD^{tree}")
    raw = (f"tree {tree}\nparent {mid}\nauthor A <{NOREPLY.format(n=1, login='alice')}> 1764201600 +0000\n"
           "committer bot <b@x> 1764201600 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQ==\n -----END PGP "
           "SIGNATURE-----\n\nSigned (#2)\n").encode()
    bad = _git(repo, "hash-object", "-t", "commit", "-w", "--stdin", stdin=raw)
    _git(repo, "update-ref", "refs/heads/main", bad)
    (repo / ".git/info/attributes").write_text("* diff=evil\n")
    # history rewritten behind the commits' backs: a graft drops `mid`, a replace ref swaps it for another message
    (repo / ".git/info/grafts").write_text(f"{bad} {good}\n")
    swapped = _git(repo, "commit-tree", tree, "-p", good, "-m", "Replaced (#9)")
    _git(repo, "replace", mid, swapped)
    config = {"core.pager": "pager", "pager.log": "pager", "pager.show": "pager", "pager.grep": "pager",
              "diff.external": "external_diff", "diff.evil.textconv": "textconv", "core.fsmonitor": "fsmonitor",
              "core.hooksPath": None, "gpg.program": "gpg", "gpg.ssh.program": "gpg_ssh",
              "gpg.x509.program": "gpg_x509", "log.showSignature": None, "diff.evil.command": "external_diff",
              "color.ui": None, "color.grep": None, "color.diff": None}
    plain = {"core.hooksPath": str(hooks), "log.showSignature": "true", "color.ui": "always", "color.grep": "always",
             "color.diff": "always"}        # not a program, but escape codes in the file names read back
    for key, prog in config.items():
        value = str(bin_dir / prog) if prog else plain[key]
        _git(repo, "config", key, value)
    return repo, good, bad, marks


def test_no_program_the_checkout_names_runs_over_every_checkout_function(tmp_path, monkeypatch):
    repo, good, bad, marks = _hostile(tmp_path)
    # the traps are live: plain git in this checkout runs the signature program and the textconv driver, and sees
    # the graft's history
    plain = subprocess.run(["git", "-C", str(repo), "log", "-p", "--format=%s"], capture_output=True, check=True)
    assert {p.name for p in marks.iterdir()} >= {"gpg", "textconv"}
    assert b"Change (#1)" not in plain.stdout
    ungrafted = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, check=True,
                               env={"PATH": "/usr/bin:/bin", "GIT_GRAFT_FILE": "/dev/null"})
    assert b"Replaced (#9)" in ungrafted.stdout
    for p in marks.iterdir():
        p.unlink()
    # what the bot's own environment may carry is not passed on either
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(tmp_path / "bin/env_diff"))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.pager")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(tmp_path / "bin/pager"))
    assert checkout.has_commit(repo, bad) and checkout.resolve(repo, bad[:12]) == bad
    assert checkout.message(repo, bad).strip() == "Signed (#2)"
    assert checkout.count(repo, good, bad) == 2
    assert [c.title for c in checkout.commits(repo, good, bad)] == ["Change (#1)", "Signed (#2)"]
    assert checkout.file_at(repo, bad, "torch/_dynamo/config.py") in ("verbose = True\n", b"verbose = True\n")
    assert checkout.readers(repo, bad, "verbose") == ["torch/_dynamo/config.py"]
    assert sorted(p.name for p in marks.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give the checkout to another user")
def test_a_checkout_another_user_owns_is_read(tmp_path):
    """The user's ~/.gitconfig is not read, so its safe.directory cannot vouch for a checkout the updater owns: the
    checkout the settings name is trusted on the command line (no program it names runs anyway)."""
    repo, good = _repo(tmp_path)
    bad = _commit(repo, "Change (#1)", {"torch/_dynamo/config.py": "verbose = True\n"})
    for folder, dirs, files in os.walk(repo):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, 65534, 65534, follow_symlinks=False)
    assert [c.pr for c in checkout.commits(repo, good, bad)] == [1]


# -- 3 and 4. who is a login, and how many a commit range mentions -------------------------------------------------
def test_only_a_noreply_address_gives_a_co_author_a_login():
    said = parse_message("Fix (#1)\n\nCo-authored-by: Sam <sam@example.com>\n"
                         "Co-authored-by: sam <1+sam@users.noreply.github.com.evil.com>\n"
                         "Co-authored-by: x <1+@users.noreply.github.com>\n"
                         "Co-authored-by: @root <2+bad_login!@users.noreply.github.com>\n"
                         "Co-authored-by: Real Person <3+real-person@users.noreply.github.com>\n")
    assert said.coauthors == (Person("Sam"), Person("sam"), Person("x"), Person("@root"),
                              Person("Real Person", "real-person"))
    c = Commit("a" * 40, "Fix (#1)", None, coauthors=said.coauthors)
    assert cc_for([c]) == ["real-person"]
    # lines a backtracking pattern took minutes over (read line by line now): no co-author, no time
    for hostile in ("<" * 60000, "a <" * 20000, "a <b>" + " " * 60000 + "x"):
        assert parse_message(f"Fix (#1)\n\nCo-authored-by: {hostile}\n").coauthors == ()


def _coauthored(i: int, n: int, *, prefix: str) -> Commit:
    people = tuple(Person(f"{prefix}{k}", f"{prefix}{k}") for k in range(n))
    return Commit(f"{i:040x}", f"[dynamo] change {i} (#{100 + i})", f"author{i}", (FileChange(f"torch/_dynamo/f{i}.py",
                  "modified"),), pr=100 + i, coauthors=people, approvers=tuple(f"rev{k}" for k in range(40)))


def _body(tmp_path: Path, commits: list[Commit], *, culprit: bool) -> str:
    """The tracking issue's body the dry-run publisher writes for a stored commit range of `commits`."""
    from bot.github import publish
    from bot.github.dryrun import DryRunPublisher
    from bot.issues.keys import tracking_key
    from bot.settings import IssueSettings, Settings, VerifySettings
    from state import culprits, db, ranges
    from state.culprits import Bisection, CommitRange, SuspectRow
    from state.ranges import Build, Range
    from tests import historydata as hd

    config, sig = "capture_scalar_outputs", hd.PENDING
    settings = Settings(state_path=tmp_path / "state.sqlite", issues=IssueSettings(min_models=1),
                        verify=VerifySettings(enabled=False))
    conn = db.connect(settings.state_path)
    env = lambda git: {**hd.ENV, "torch_git": git}  # noqa: E731
    hd.store_run(conn, [hd.ok("GPT2Model", "baseline", 1), hd.ok("GPT2Model", config, 1)], kind="nightly",
                 nightly="2026-11-27", env=env("1" * 40))
    crash = dataclasses.replace(hd.crash("GPT2Model", config), attempts=3)      # confirmed: not a flake
    run_id = hd.store_run(conn, [hd.ok("GPT2Model", "baseline", 1), crash], kind="nightly",
                          nightly="2026-11-28", env=env("2" * 40))
    ranges.record(conn, Range(run_id=run_id, config=config, signature=sig, kind="new_crash", status="found",
                              good=Build("2026-11-27", "2.13.0", "1" * 40), bad=Build("2026-11-28", "2.13.0", "2" * 40),
                              models=["GPT2Model"]))
    suspects = [SuspectRow(c.sha, 100 - i, [f"changes {c.files[0].path}, the innermost torch frame of the crash"])
                for i, c in enumerate(commits)]
    bisection = Bisection(culprit=commits[0].sha, parent="0" * 40) if culprit else None
    culprits.record(conn, CommitRange(sig, "1" * 40, "2" * 40, "found" if culprit else "suspects", commits=commits,
                                      suspects=suspects, bisection=bisection, config=config))
    out = tmp_path / "out"
    publish.publish_run(conn, settings, run_id, publisher=DryRunPublisher(out), dry_run=True, out_dir=str(out))
    conn.close()
    (path,) = out.glob(f"*-create-{tracking_key(config, sig)}.md")
    return path.read_text()


MENTION = re.compile(r"(?<![\w`])@([A-Za-z0-9][A-Za-z0-9-]*)")


def _mentioned(body: str) -> set[str]:
    """The logins GitHub would notify: @login outside code spans (a ZWJ after @ defuses one)."""
    return set(MENTION.findall(re.sub(r"`[^`\n]*`", "", body)))


def test_one_culprit_with_500_co_authors_mentions_and_ccs_three(tmp_path):
    c = _coauthored(1, 500, prefix="co")
    body = _body(tmp_path, [c], culprit=True)
    bound = {"author1", *(f"co{k}" for k in range(MAX_COAUTHORS))}
    assert _mentioned(body) == bound
    assert re.search(r"\ncc (@\S+ ?)+\n", body).group(0).split()[1:] == [f"@{p}" for p in ["author1", "co0", "co1"]]
    assert "with @co0, @co1, `co2`, `co3`, `co4` and 495 more, approved by `rev0`" in body
    assert "`rev4` and 35 more" in body and "co499" not in body


def test_three_suspects_with_200_co_authors_each_mention_nine_at_most(tmp_path):
    commits = [_coauthored(i, 200, prefix=f"s{i}x") for i in range(1, 4)]
    hostile = FileChange("torch/_dynamo/@evil #12 <!-- flagsweep:end --> `x`.py", "modified")
    commits[0] = dataclasses.replace(commits[0], files=(hostile,))        # a path, in the why column
    body = _body(tmp_path, commits, culprit=False)
    assert body.count("<!-- flagsweep:end -->") == 1 and "#12" not in body
    mentioned = _mentioned(body)
    assert len(mentioned) <= 3 * (1 + MAX_COAUTHORS)
    assert mentioned == {f"author{i}" for i in range(1, 4)} | {f"s{i}x{k}" for i in range(1, 4) for k in range(2)}
    assert "and 195 more" in body


def test_a_name_that_looks_like_a_login_is_code_and_a_hostile_title_is_defused(tmp_path):
    said = parse_message("[dynamo] `x` @someone <!-- flagsweep:end --> fixes #123 (#5)\n\n"
                         "Co-authored-by: Sam <sam@example.com>\nCo-authored-by: torvalds <linus@kernel.org>\n")
    c = Commit("a" * 40, said.title, "alice", (FileChange("torch/_dynamo/x.py", "modified"),), pr=5,
               coauthors=said.coauthors)
    body = _body(tmp_path, [c], culprit=True)
    assert _mentioned(body) == {"alice"}
    assert "by @alice with `Sam`, `torvalds`" in body
    line = next(x for x in body.splitlines() if x.startswith("Bisected to"))
    assert "@someone" not in line and "<!-- flagsweep" not in line and "#123" not in line
    assert ": ``[dynamo] `x` @\u200dsomeone <\u200d!-- flagsweep:end -\u200d-> fixes #\u200d123``." in line
    assert body.count("<!-- flagsweep:end -->") == 1


# -- 5. GitHub's compare of hostile commits (no checkout) -------------------------------------------------------------
def test_githubs_compare_of_hostile_commits_gives_sane_commits(fake_github):
    fake_github.state.add_repo("pytorch/pytorch")
    many = "".join(f"Co-authored-by: Person {k} <{k}+p{k}@users.noreply.github.com>\n" for k in range(500))
    messages = {
        "forged": "Fix (#1)\x1fM\ttorch/x.py\n\x1e" + FORGED + "\x1f\x1fm@x\x1fForged (#2)\n",
        "many": "Many (#3)\n\n" + many,
        "looks": "Looks (#4)\n\nCo-authored-by: Sam <sam@example.com>\nCo-authored-by: octocat <o@example.com>\n",
        "huge": "Huge (#5)\n\n" + "x" * (10 * 2 ** 20) + "\nCo-authored-by: Late <9+late@users.noreply.github.com>\n",
    }
    shas, parent = [], None
    for i, (name, message) in enumerate([("base", "Base"), *messages.items()]):
        sha = f"{i + 1:040x}"
        fake_github.state.add_commit("pytorch/pytorch", sha, message, author=None if name == "looks" else "alice",
                                     files=[{"filename": f"torch/_dynamo/{name}.py", "status": "modified"}],
                                     parent=parent, email=NOREPLY.format(n=7, login="gitonly") if name == "looks"
                                     else None)
        shas.append(sha)
        parent = sha
    found = GitHubPublisher(fake_github.settings()).commit_range("pytorch/pytorch", shas[0], shas[-1], most=500)
    forged, many_c, looks, huge = found
    assert [c.sha for c in found] == shas[1:] and FORGED not in {c.sha for c in found}
    assert forged.files == (FileChange("torch/_dynamo/forged.py", "modified"),) and forged.pr is None
    assert len(many_c.coauthors) == 500 and cc_for([many_c]) == ["alice", "p0", "p1"]
    assert looks.coauthors == (Person("Sam"), Person("octocat")) and looks.author == "gitonly"  # its noreply address
    assert cc_for([looks]) == ["gitonly"]
    assert huge.title == "Huge (#5)" and huge.coauthors == ()           # past MAX_MESSAGE: not read
    assert len(huge.title) < MAX_MESSAGE
    assert cc_for([forged, many_c, looks]) == ["alice", "p0", "p1", "gitonly"]
