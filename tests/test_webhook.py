"""The webhook server (Starlette on uvicorn) over real HTTP, with real GitHub payloads signed (and mis-signed)."""
import json
import logging
import socket
import time
from dataclasses import fields, replace
from pathlib import Path

import httpx
import pytest

from bot.settings import GitHubSettings, Settings, WebhookSettings
from bot.service.webhook import Health, WebhookApp, decide, is_own, sign, verify_signature
from bot.service.server import WebhookServer
from harness.core.record import RecordError
from state import db, deliveries, jobs

FIXTURES = Path(__file__).parent / "fixtures" / "webhooks"
SECRET = "It's a Secret to Everybody"


def payload(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.payload.json").read_text())


def comment_payload(body: str, login: str = "triager", action: str = "created", previous: str | None = None) -> dict:
    data = payload(f"issue_comment.{action}")
    data["comment"]["body"] = body
    data["comment"]["user"]["login"] = login
    if previous is not None:
        data["changes"] = {"body": {"from": previous}}
    return data


@pytest.fixture
def server(tmp_path):
    # Room for a loaded 2-core CI machine: a sender here never stalls on purpose.
    yield from serving(tmp_path, read_timeout=10.0, header_timeout=10.0)


@pytest.fixture
def impatient_server(tmp_path):
    # The slow-client limits under test: a stalled sender is timed out after 1 s.
    yield from serving(tmp_path, read_timeout=1.0, header_timeout=1.0)


def serving(tmp_path, **webhook):
    settings = Settings(state_path=tmp_path / "state.sqlite", webhook=WebhookSettings(secret=SECRET, **webhook))
    conn = db.connect(settings.state_path)
    woken = []
    app = WebhookApp(conn, settings, notify=lambda: woken.append(1), health=lambda: Health(True, {"queue": jobs.depth(conn)}))
    srv = WebhookServer(app, "127.0.0.1", 0)
    srv.start()
    srv.conn, srv.woken, srv.url = conn, woken, f"http://127.0.0.1:{srv.server_port}"
    yield srv
    srv.stop()
    conn.close()


def post(srv, event: str, data, delivery: str = "d-1", secret: str | None = SECRET, raw: bytes | None = None):
    body = raw if raw is not None else json.dumps(data).encode()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": "application/json"}
    if secret is not None:
        headers["X-Hub-Signature-256"] = sign(secret, body)
    return httpx.post(srv.url + "/webhook", content=body, headers=headers, timeout=10)


def test_signature_is_hmac_sha256_of_the_body():
    # The example from GitHub's "Validating webhook deliveries" page.
    assert sign(SECRET, b"Hello, World!") == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert verify_signature(SECRET, b"x", sign(SECRET, b"x"))
    assert not verify_signature(SECRET, b"x", sign(SECRET, b"y"))
    assert not verify_signature(SECRET, b"x", None)
    assert not verify_signature(None, b"x", sign(SECRET, b"x"))
    assert not verify_signature(SECRET, b"x", "sha1=" + sign(SECRET, b"x")[7:])


def test_signed_command_comment_is_queued_once(server):
    data = comment_payload("@flagsweep-bot rerun")
    r = post(server, "issue_comment", data, delivery="abc")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    job = jobs.get(server.conn, r.json()["job"])
    assert job.kind == "command" and job.payload["author"] == "triager"   # a sweep: the work lane
    assert job.payload["issue"] == data["issue"]["number"] and job.payload["repo"] == "Codertocat/Hello-World"
    assert job.payload["delivery"] == "abc"
    assert server.woken == [1]
    again = post(server, "issue_comment", data, delivery="abc")
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert jobs.depth(server.conn) == 1


def test_questions_go_to_the_quick_lane(server):
    r = post(server, "issue_comment", comment_payload("@flagsweep-bot help\n@flagsweep-bot cc add @a"), delivery="q")
    assert jobs.get(server.conn, r.json()["job"]).kind == "quick"
    r = post(server, "issue_comment", comment_payload("@flagsweep-bot status\n@flagsweep-bot bisect --config a --model B"),
             delivery="q2")
    assert jobs.get(server.conn, r.json()["job"]).kind == "command"


def test_unsigned_and_missigned_are_rejected_and_store_nothing(server):
    data = comment_payload("@flagsweep-bot rerun")
    assert post(server, "issue_comment", data, secret=None).status_code == 401
    assert post(server, "issue_comment", data, secret="wrong").status_code == 401
    body = json.dumps(data).encode()
    tampered = body.replace(b"triager", b"attacker")
    r = httpx.post(server.url + "/webhook", content=tampered, timeout=10, headers={
        "X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "t", "X-Hub-Signature-256": sign(SECRET, body)})
    assert r.status_code == 401
    assert jobs.depth(server.conn) == 0 and deliveries.count(server.conn) == 0


def test_malformed_json_is_400(server):
    r = post(server, "issue_comment", None, raw=b'{"action": "created",')
    assert r.status_code == 400 and "malformed" in r.json()["error"]
    assert post(server, "issue_comment", None, raw=b"[1, 2]").status_code == 400


@pytest.mark.parametrize("size", [1 << 20, 5 << 20])
def test_oversized_signed_body_gets_a_413_the_sender_reads_eight_times_in_a_row(server, size):
    """Issue 12 item 10: the 413 must reach the sender, not a connection reset (the body is drained first).

    The sender writes the whole request, then reads: a server that answers and closes with body bytes
    unread makes the kernel reset the connection, and `sendall` fails with BrokenPipe before any answer.
    (httpx and requests hide that by reading after a failed write, so the plain socket is the strict test.)
    """
    body = json.dumps({"zen": "x" * size}).encode()
    for i in range(8):
        head = (f"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\nX-GitHub-Delivery: big-{i}\r\n"
                f"X-Hub-Signature-256: {sign(SECRET, body)}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=30) as s:
            s.sendall(head + body)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        status, _, rest = answer.partition(b"\r\n")
        assert status == b"HTTP/1.1 413 Request Entity Too Large", answer[:200]
        assert b"body over 1000000 bytes" in rest
        r = httpx.post(server.url + "/webhook", content=body, timeout=30, headers={
            "X-GitHub-Event": "ping", "X-GitHub-Delivery": f"big-x-{i}", "X-Hub-Signature-256": sign(SECRET, body)})
        assert r.status_code == 413 and r.json() == {"error": "body over 1000000 bytes"}
    assert deliveries.count(server.conn) == 0
    # The server is still fine afterwards.
    assert post(server, "ping", payload("ping"), delivery="after").json()["status"] == "pong"


def test_oversized_body_over_the_drain_limit_is_413_before_reading(server):
    # Announce 50 MB (past drain_limit) and send nothing: the answer must come from the header alone.
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as s:
        s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\n"
                  b"X-GitHub-Delivery: big\r\nContent-Length: 50000000\r\n\r\n")
        answer = s.recv(4096).decode()
    assert answer.startswith("HTTP/1.0 413") or answer.startswith("HTTP/1.1 413")
    assert deliveries.count(server.conn) == 0


def test_a_sender_that_stalls_mid_body_gets_408(impatient_server):
    server = impatient_server
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as s:
        s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\n"
                  b"X-GitHub-Delivery: slow\r\nContent-Length: 100\r\n\r\n" + b"{" * 10)
        answer = s.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 408")
    assert deliveries.count(server.conn) == 0


def test_a_sender_that_never_finishes_its_headers_is_dropped(impatient_server):
    server = impatient_server
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as s:
        s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
        assert s.recv(4096) == b""          # closed by the server after header_timeout, no answer owed
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")   # kept alive: the next head has the same deadline
        answer = s.makefile("rb")
        assert answer.readline().startswith(b"HTTP/1.1 200")
        head = dict(line.decode().strip().lower().split(": ", 1) for line in iter(answer.readline, b"\r\n"))
        answer.read(int(head["content-length"]))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        assert answer.read() == b""
    assert httpx.get(server.url + "/healthz", timeout=10).json()["connections"]["timed_out"] == 2


def slow_clients(port: int, peers: range, per_peer: int) -> list[socket.socket]:
    """Connections from 127.0.0.<peer> that send half a request head and then nothing."""
    opened = []
    for peer in peers:
        for _ in range(per_peer):
            s = socket.socket()
            s.settimeout(5)
            s.bind((f"127.0.0.{peer}", 0))
            s.connect(("127.0.0.1", port))
            s.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\n")
            opened.append(s)
    return opened


@pytest.fixture
def patient_server(tmp_path):
    # Slow clients are not timed out during the test: only the connection caps keep the server reachable.
    yield from serving(tmp_path, read_timeout=60.0, header_timeout=60.0)


def test_slow_clients_from_many_addresses_do_not_take_deliveries_down(patient_server):
    srv, opened = patient_server, []
    try:
        for round_ in range(3):         # a flood, then the same flood reconnecting, twice
            opened += slow_clients(srv.server_port, range(2, 14), per_peer=25)   # 300 connections a round
            comment = comment_payload("@flagsweep-bot rerun")
            comment["comment"]["id"] += round_      # a new comment each round (one comment is answered once)
            r = post(srv, "issue_comment", comment, delivery=f"flood-{round_}")
            assert r.status_code == 202 and r.json()["status"] == "queued"
        health = httpx.get(srv.url + "/healthz", timeout=10).json()["connections"]
    finally:
        for s in opened:
            s.close()
    assert jobs.depth(srv.conn) == 3
    cfg = Settings().webhook
    assert health["refused"] >= 3 * 300 - (cfg.max_connections - cfg.reserve)
    assert health["waiting"] <= cfg.max_connections - cfg.reserve


def test_one_address_holds_at_most_max_per_peer_connections(patient_server):
    srv = patient_server
    opened = slow_clients(srv.server_port, range(2, 3), per_peer=Settings().webhook.max_per_peer + 5)
    try:
        r = post(srv, "ping", payload("ping"), delivery="p")
        assert r.status_code == 200
        health = httpx.get(srv.url + "/healthz", timeout=10).json()["connections"]
    finally:
        for s in opened:
            s.close()
    assert health["refused"] == 5 and health["waiting"] == Settings().webhook.max_per_peer


def test_too_many_header_fields_get_431(server):
    body = json.dumps(payload("ping")).encode()
    headers = [("X-GitHub-Event", "ping"), ("X-GitHub-Delivery", "h"), ("X-Hub-Signature-256", sign(SECRET, body))]
    headers += [(f"X-Filler-{i}", "1") for i in range(150)]
    r = httpx.post(server.url + "/webhook", content=body, headers=headers, timeout=10)
    assert r.status_code == 431 and deliveries.count(server.conn) == 0


def test_every_request_gets_an_access_log_line(server, caplog):
    with caplog.at_level(logging.INFO, logger="flagsweep.access"):
        post(server, "ping", payload("ping"), delivery="logged")
        httpx.get(server.url + "/healthz", timeout=10)
        end = time.monotonic() + 5
        while len(caplog.records) < 2 and time.monotonic() < end:
            time.sleep(0.01)
    lines = [r.getMessage() for r in caplog.records if r.name == "flagsweep.access"]
    assert any('"POST /webhook" 200' in line and "delivery=logged" in line for line in lines), lines
    assert any('"GET /healthz" 200' in line for line in lines), lines


def test_ping_and_unknown_events(server):
    r = post(server, "ping", payload("ping"), delivery="p1")
    assert r.status_code == 200 and r.json()["status"] == "pong"
    r = post(server, "issues", payload("issues.opened"), delivery="i1")
    assert r.status_code == 202 and r.json()["status"] == "ignored"
    assert deliveries.get(server.conn, "i1")["outcome"] == "ignored"
    assert jobs.depth(server.conn) == 0


def test_own_comments_and_comments_without_commands_are_ignored(server):
    r = post(server, "issue_comment", comment_payload("@flagsweep-bot rerun", login="flagsweep-bot[bot]"), delivery="o1")
    assert r.json() == {"status": "ignored", "reason": "own comment"}
    r = post(server, "issue_comment", comment_payload("LGTM, thanks"), delivery="o2")
    assert r.json()["reason"] == "no new command"
    assert jobs.depth(server.conn) == 0


def test_edited_comment_is_queued_only_with_new_commands(server):
    same = comment_payload("@flagsweep-bot rerun\ntypo fixed", action="edited", previous="@flagsweep-bot rerun\ntpyo")
    assert post(server, "issue_comment", same, delivery="e1").json()["status"] == "ignored"
    new = comment_payload("@flagsweep-bot rerun\n@flagsweep-bot status", action="edited", previous="@flagsweep-bot rerun")
    r = post(server, "issue_comment", new, delivery="e2")
    assert r.json()["status"] == "queued"
    assert jobs.get(server.conn, r.json()["job"]).payload["previous"] == "@flagsweep-bot rerun"


def test_app_installation_payload_keeps_the_installation(server):
    data = payload("issue_comment.created.with-installation")
    data["comment"]["body"] = "@flagsweep-bot help"
    data["comment"]["user"]["login"] = "someone"
    r = post(server, "issue_comment", data, delivery="w1")
    assert jobs.get(server.conn, r.json()["job"]).payload["installation_id"] == data["installation"]["id"]


def test_healthz_and_unknown_paths(server):
    r = httpx.get(server.url + "/healthz", timeout=10)
    assert r.status_code == 200 and r.json() == {"ok": True, "queue": 0, "connections": {
        "open": 1, "waiting": 0, "busy": 1, "refused": 0, "timed_out": 0}}
    assert httpx.get(server.url + "/nope", timeout=10).status_code == 404
    assert httpx.get(server.url + "/webhook", timeout=10).status_code == 405


def test_a_port_in_use_fails_at_construction(server):
    with pytest.raises(OSError):
        WebhookServer(WebhookApp(server.conn, Settings()), "127.0.0.1", server.server_port)


def test_decide_is_pure_and_checks_the_repository():
    s = Settings(github=GitHubSettings(repo="pytorch/flagsweep-triage"))
    d = decide("issue_comment", comment_payload("@flagsweep-bot rerun"), s)
    assert d.outcome == "ignored" and "not pytorch/flagsweep-triage" in d.reason
    assert decide("issue_comment", {**comment_payload("x"), "action": "deleted"}, Settings()).outcome == "ignored"
    assert is_own("FlagSweep-Bot[bot]", "flagsweep-bot") and not is_own("flagsweep-bot-fan", "flagsweep-bot")


def _set(path: str, value):
    def mutate(data: dict) -> None:
        *parents, last = path.split(".")
        for key in parents:
            data = data[key]
        data[last] = value
    return mutate


@pytest.mark.parametrize("fixture,path,value", [
    ("issue_comment.created", "issue.number", "1"),
    ("issue_comment.created", "issue.number", True),
    ("issue_comment.created", "comment", ["a list"]),
    ("issue_comment.created", "comment.body", 5),
    ("issue_comment.created", "comment.user", None),
    ("issue_comment.created", "sender.login", None),
    ("issue_comment.created", "repository", "Codertocat/Hello-World"),
    ("issue_comment.created", "installation", {"id": "7"}),
    ("issue_comment.created", "action", ["created"]),
    ("issue_comment.edited", "changes.body", "old text"),
    # Issue 31: values of the right type that would fail the job later: refused at the door.
    ("issue_comment.created", "issue.number", 2**70),
    ("issue_comment.created", "comment.id", 0),
    ("issue_comment.created", "comment.body", "@flagsweep-bot help \ud800"),
    ("issue_comment.edited", "changes.body.from", "before \udfff"),
])
def test_a_signed_payload_with_wrongly_typed_fields_gets_400_and_queues_nothing(server, caplog, fixture, path, value):
    data = comment_payload("@flagsweep-bot rerun", action=fixture.split(".")[1], previous="before")
    _set(path, value)(data)
    with caplog.at_level(logging.INFO):
        r = post(server, "issue_comment", data, delivery="typed")
    assert r.status_code == 400 and path in r.json()["error"]
    assert jobs.depth(server.conn) == 0 and deliveries.count(server.conn) == 0
    told = [rec for rec in caplog.records if rec.name == "bot.service.webhook"]
    assert len(told) == 1 and path in told[0].getMessage() and not any(rec.exc_info for rec in caplog.records)


def test_the_stored_comment_job_reads_back_as_the_job_decide_made(server, tmp_path):
    data = comment_payload("@flagsweep-bot rerun")
    r = post(server, "issue_comment", data, delivery="abc")
    stored = jobs.get(server.conn, r.json()["job"]).payload
    made = decide("issue_comment", data, Settings(state_path=tmp_path / "unused.sqlite")).job
    assert jobs.CommentJob.parse(stored) == replace(made, delivery="abc")
    assert sorted(stored) == sorted(f.name for f in fields(jobs.CommentJob))


@pytest.mark.parametrize("stored, named", [
    ({"issue": 7, "isue": 7}, "unknown field 'isue'"),
    ({"repo": "o/r", "body": "@flagsweep-bot help"}, "missing field 'issue'"),
])
def test_a_comment_job_that_does_not_parse_names_the_field(stored, named):
    with pytest.raises(RecordError, match=named):
        jobs.CommentJob.parse(stored)


def test_a_comment_job_of_an_older_store_reads_back():
    """v4 stores kept jobs whose payload holds only the issue (tests/test_store_migrations.py)."""
    assert jobs.CommentJob.parse({"issue": 7}) == jobs.CommentJob(issue=7)


def test_a_captured_delivery_resent_under_a_new_delivery_id_is_a_duplicate(server):
    """Issue 31: the dedupe is on the comment id and the hash of what it asks, not only X-GitHub-Delivery."""
    data = comment_payload("@flagsweep-bot help")
    assert post(server, "issue_comment", data, delivery="first").json()["status"] == "queued"
    again = post(server, "issue_comment", data, delivery="forged-new-id")
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    # An edit of the same comment asks something new: queued.
    edited = comment_payload("@flagsweep-bot help\n@flagsweep-bot status", action="edited",
                             previous="@flagsweep-bot help")
    edited["comment"]["id"] = data["comment"]["id"]
    assert post(server, "issue_comment", edited, delivery="edit").json()["status"] == "queued"
    assert jobs.depth(server.conn) == 2


def test_a_deeply_nested_body_is_a_400_not_a_traceback(server, caplog):
    raw = b'{"action": "created", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with caplog.at_level(logging.INFO):
        r = post(server, "issue_comment", None, raw=raw, delivery="deep")
    assert r.status_code == 400 and r.json() == {"error": "malformed JSON: nested too deeply"}
    assert jobs.depth(server.conn) == 0 and deliveries.count(server.conn) == 0
    assert not any(rec.exc_info for rec in caplog.records)


def test_the_uvicorn_and_h11_connections_py_builds_on_are_pinned():
    """bot/service/connections.py subclasses uvicorn's internal H11Protocol: pyproject allows only the minor
    releases constraints.txt pins (and the tests ran with), never an open-ended `>=`."""
    import tomllib
    from packaging.requirements import Requirement
    from packaging.version import Version

    root = Path(__file__).parent.parent
    deps = {r.name: r.specifier for r in map(Requirement, tomllib.loads(
        (root / "pyproject.toml").read_text())["project"]["dependencies"])}
    pins = dict(line.split("==") for line in (root / "constraints.txt").read_text().split() if "==" in line)
    for name in ("uvicorn", "h11"):
        pinned = Version(pins[name])
        assert name in deps and pinned in deps[name], (name, deps.get(name))
        assert Version(f"{pinned.major}.{pinned.minor + 1}") not in deps[name], (name, deps[name])


def test_a_comment_of_thousands_of_commands_is_queued_without_parsing_them_all(server):
    """Issue 31: a comment near max_body holds ~20,000 command lines; parsing each (a millisecond or more) on the
    request thread would outlast GitHub's 10 s. Only the first max_per_comment distinct lines are parsed."""
    body = "\n".join(f"@flagsweep-bot sweep --config c{i} --models M" for i in range(18_000))
    r = post(server, "issue_comment", comment_payload(body), delivery="many")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    assert jobs.get(server.conn, r.json()["job"]).kind == "command"
