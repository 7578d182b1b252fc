"""The webhook receiver's HTTP side: a Starlette app served by uvicorn in a thread of `flagsweep serve`.

The request logic (signature, replay protection, jobs) is bot.service.webhook.WebhookApp;
this module only speaks HTTP, with the limits a public endpoint needs:
- a body over `max_body` gets 413. The body is read and discarded first (up to
  `drain_limit`), because closing a socket with unread data makes the kernel send
  a reset, and the sender then sees "connection reset" instead of our answer;
- more than `max_headers` header fields get 431 (uvicorn's h11 already bounds
  the header block's bytes);
- a sender that stops sending mid-body for `read_timeout` seconds gets 408;
- a sender that never finishes its headers is dropped after `header_timeout`, and
  connections are capped per peer and in all (bot.service.connections);
- one access-log line per request on the `flagsweep.access` logger.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from bot.settings import WebhookSettings
from bot.service import connections
from bot.service.webhook import WebhookApp

log = logging.getLogger(__name__)
access = logging.getLogger("flagsweep.access")

CLOSE = {"Connection": "close"}


class TooLarge(Exception):
    """The body passed max_body (it was drained up to drain_limit)."""


async def read_body(request: Request, cfg: WebhookSettings) -> bytes:
    """The whole body; TooLarge past `max_body`, TimeoutError when the sender pauses `read_timeout` seconds."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cfg.drain_limit:
        raise TooLarge()            # not worth reading: answer now, the connection closes
    chunks: list[bytes] = []
    size = 0
    stream = request.stream().__aiter__()
    while True:
        with anyio.fail_after(cfg.read_timeout):
            try:
                chunk = await stream.__anext__()
            except StopAsyncIteration:
                break
        size += len(chunk)
        if size <= cfg.max_body:
            chunks.append(chunk)
        elif size > cfg.drain_limit:
            raise TooLarge()
    if size > cfg.max_body:
        raise TooLarge()
    return b"".join(chunks)


def asgi_app(app: WebhookApp, gate: connections.ConnectionGate) -> Any:
    """The ASGI application: POST /webhook (or /), GET /healthz (with `gate`'s counts), wrapped in the access log."""
    cfg = app.settings.webhook

    async def webhook(request: Request) -> JSONResponse:
        try:
            body = await read_body(request, cfg)
        except TooLarge:
            return JSONResponse({"error": f"body over {cfg.max_body} bytes"}, 413, headers=CLOSE)
        except TimeoutError:
            return JSONResponse({"error": f"no body data for {cfg.read_timeout:.0f}s"}, 408, headers=CLOSE)
        except ClientDisconnect:
            return JSONResponse({"error": "client went away"}, 400, headers=CLOSE)
        if len(request.headers.raw) > cfg.max_headers:
            return JSONResponse({"error": f"more than {cfg.max_headers} header fields"}, 431, headers=CLOSE)
        try:
            status, data = await run_in_threadpool(app.handle, request.headers, body)
        except Exception:   # an internal error is logged, the sender gets a short answer
            log.exception("webhook delivery failed")
            status, data = 500, {"error": "internal error"}
        return JSONResponse(data, status)

    async def healthz(request: Request) -> JSONResponse:
        status, data = await run_in_threadpool(app.healthz)
        data["connections"] = gate.counts()
        return JSONResponse(data, status)

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        code = getattr(exc, "status_code", 404)
        return JSONResponse({"error": "not found" if code == 404 else "method not allowed"}, code)

    routes = [Route("/webhook", webhook, methods=["POST"]), Route("/", webhook, methods=["POST"]),
              Route("/healthz", healthz, methods=["GET"])]
    inner = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    return AccessLog(inner) if cfg.access_log else inner


class AccessLog:
    """ASGI middleware: one line per request (client, method, path, status, bytes, milliseconds, delivery)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, seen = time.monotonic(), {"status": 0, "bytes": 0}

        async def watch(message: dict) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
            elif message["type"] == "http.response.body":
                seen["bytes"] += len(message.get("body", b""))
            await send(message)
        try:
            await self.app(scope, receive, watch)
        finally:
            client = scope.get("client") or ("-", 0)
            headers = dict(scope.get("headers") or [])
            delivery = headers.get(b"x-github-delivery", b"-").decode("latin-1")
            access.info('%s "%s %s" %d %d %.0fms delivery=%s', client[0], scope["method"], scope["path"],
                        seen["status"], seen["bytes"], (time.monotonic() - start) * 1000, delivery)


class WebhookServer:
    """uvicorn serving the app on a socket bound at construction (so a bad port fails at once); start()/stop()."""

    def __init__(self, app: WebhookApp, host: str, port: int, *, grace: float = 10.0) -> None:
        cfg = app.settings.webhook
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.create_server((host, port), family=family, backlog=128)
        self.server_address = self.sock.getsockname()
        self.gate = connections.ConnectionGate(cfg)
        # No uvicorn limit_concurrency: it counts connections still sending headers and answers 503 to all.
        config = uvicorn.Config(asgi_app(app, self.gate), http=connections.protocol(self.gate), lifespan="off",
                                log_config=None, access_log=False, server_header=False, timeout_keep_alive=5,
                                timeout_graceful_shutdown=max(1, int(grace)))
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="flagsweep-webhook", daemon=True)

    @property
    def server_port(self) -> int:
        """The port listened on (the one picked when 0 was asked)."""
        return self.server_address[1]

    def start(self, timeout: float = 30.0) -> None:
        """Serve in a daemon thread; returns once uvicorn accepts connections."""
        self.thread.start()
        end = time.monotonic() + timeout
        while not self.server.started and self.thread.is_alive() and time.monotonic() < end:
            time.sleep(0.01)
        if not self.server.started:
            raise RuntimeError("the webhook server did not start")

    def stop(self, timeout: float = 15.0) -> None:
        """Stop accepting, let requests in flight finish (uvicorn's graceful shutdown), close the socket."""
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout)
        self.sock.close()
