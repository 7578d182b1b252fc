"""Know who we are: the credentials' own login, read once from GitHub, against `[github] bot_login`."""
from __future__ import annotations

import pytest

from bot.cli.main import main
from bot.github.client import GitHubPublisher, IdentityError
from tests.fakegithub import FakeGitHub
from tests.historydata import night, store_run


def _pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def test_a_token_whose_login_matches_is_asked_once(fake_github: FakeGitHub) -> None:
    settings = fake_github.settings()
    assert GitHubPublisher(settings).login == fake_github.bot_login
    assert GitHubPublisher(settings).login == fake_github.bot_login
    assert len(fake_github.requests.matching("GET", r"^/user$")) == 1


def test_no_bot_login_takes_the_tokens_login(fake_github: FakeGitHub) -> None:
    settings = fake_github.settings(token=fake_github.human_token, bot_login="")
    assert GitHubPublisher(settings).login == fake_github.human
    assert settings.bot_login == ""           # the settings stay as read; the publisher writes as the adopted login


def test_a_token_of_another_account_is_refused_in_one_line(fake_github: FakeGitHub) -> None:
    settings = fake_github.settings(token=fake_github.human_token)   # bot_login stays flagsweep-bot
    with pytest.raises(IdentityError) as err:
        GitHubPublisher(settings)
    text = str(err.value)
    assert "\n" not in text and "'alice'" in text and "'flagsweep-bot'" in text


def test_publish_refuses_before_writing_anything(fake_github: FakeGitHub, tmp_path, capsys, monkeypatch) -> None:
    from state import db
    state = tmp_path / "state.sqlite"
    conn = db.connect(state)
    store_run(conn, night(b_crashes=True), kind="nightly", nightly="2026-11-01")
    conn.close()
    settings = tmp_path / "s.toml"
    settings.write_text(f'[github]\nrepo = "{fake_github.repo}"\nbase_url = "{fake_github.base_url}"\n'
                        f'bot_login = "flagsweep-bot"\nmutation_interval = 0.0\n'
                        f'[verify]\nenabled = false\n')
    monkeypatch.setenv("FLAGSWEEP_GITHUB_TOKEN", fake_github.human_token)
    rc = main(["--settings", str(settings), "--state", str(state), "publish"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "write as 'alice'" in err
    assert fake_github.requests.writes() == [] and fake_github.state.issues(fake_github.repo) == []


def test_a_github_app_writes_as_its_slug_bot(fake_github: FakeGitHub) -> None:
    login = fake_github.state.add_app(4321, "triagebot", 77, fake_github.repo)
    pem = _pem()
    settings = fake_github.settings(token=None, app_id=4321, private_key=pem, installation_id=77, bot_login="")
    pub = GitHubPublisher(settings)
    assert pub.login == login == "triagebot[bot]" and settings.bot_login == ""
    assert fake_github.requests.matching("GET", r"^/app$")
    assert not fake_github.requests.matching("GET", r"^/user$")      # an App cannot read /user
    n = pub.create_issue("kapp", "t", "<!-- flagsweep:key=kapp -->\nb", [], look=False)
    assert fake_github.state.repo(fake_github.repo).issues[n].user == "triagebot[bot]"
    wrong = fake_github.settings(token=None, app_id=4321, private_key=pem, installation_id=77, bot_login="other-bot")
    with pytest.raises(IdentityError, match="'triagebot\\[bot\\]'"):
        GitHubPublisher(wrong)


def test_the_fake_answers_get_app_only_to_a_jwt(fake_github: FakeGitHub) -> None:
    import github
    fake_github.state.add_app(99, "slugged", 5, fake_github.repo)
    app = github.GithubIntegration(auth=github.Auth.AppAuth(99, _pem()), base_url=fake_github.base_url).get_app()
    assert (app.slug, app.id) == ("slugged", 99)
    with pytest.raises(github.GithubException) as err:
        fake_github.client()._Github__requester.requestJsonAndCheck("GET", "/app")
    assert err.value.status == 401


def test_nightly_and_serve_refuse_at_start_up_before_sweeping(fake_github: FakeGitHub, tmp_path, capsys,
                                                              monkeypatch) -> None:
    from state import db, runs
    settings = tmp_path / "s.toml"
    settings.write_text(f'[github]\nrepo = "{fake_github.repo}"\nbase_url = "{fake_github.base_url}"\n'
                        f'bot_login = "flagsweep-bot"\n[webhook]\nsecret = "s"\nport = 0\n')
    monkeypatch.setenv("FLAGSWEEP_GITHUB_TOKEN", fake_github.human_token)
    state = tmp_path / "state.sqlite"
    rc = main(["--settings", str(settings), "--state", str(state), "nightly", "--torch", "current",
               "--models", "BertModel"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("flagsweep nightly: the GitHub credentials write as 'alice'")
    assert not state.exists() or runs.list_runs(db.connect(state)) == []
    rc = main(["--settings", str(settings), "--state", str(state), "serve", "--no-schedule"])
    assert rc == 2 and "write as 'alice'" in capsys.readouterr().err
