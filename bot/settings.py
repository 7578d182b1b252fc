"""Settings: read and validated once, into one typed object that is passed down.

This is the only module that reads environment variables. Sources, later wins:
built-in defaults < the TOML settings file (--settings or FLAGSWEEP_SETTINGS)
< environment variables (secrets) < command-line flags (applied by the CLI).
Each feature reads its own section; a bad value is a SettingsError naming it.
"""
from __future__ import annotations

import os
import re
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.core.files import UnreadableFile, read_toml
from harness.core.fixes import MAX_NIGHTS
from harness.engine.options import SweepOptions
from harness.core.population import POPULATIONS


class SettingsError(ValueError):
    """The settings file or environment is wrong; the message says where."""


def default_state_path(env: Mapping[str, str]) -> Path:
    """Where the store lives unless told otherwise."""
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", ".")) / ".local" / "share")
    return Path(base) / "flagsweep" / "state.sqlite"


@dataclass
class SweepSettings:
    workers: int = 0                 # 0: one per core
    timeout: float = 300.0           # seconds per item
    backend: str = "count"           # count | eager | aot_eager | inductor
    device: str = "cpu"
    max_items_per_worker: int = 50   # recycle a worker after this many items
    max_rss_mb: float = 6000.0       # recycle above this RSS; hard limit is 1.5x
    python: str | None = None        # interpreter for the workers
    config_file: str | None = None   # extra named configs (TOML)
    confirm_runs: int = 2            # flake confirmation re-runs
    population: str = "all"          # all | graph-breaking: models with more than one graph at baseline

    def options(self, python: str | None = None, extra_modules: list[str] | None = None) -> SweepOptions:
        """The engine's options from these settings (`python`: the workers' interpreter, default the setting)."""
        return SweepOptions(workers=self.workers, timeout=self.timeout, backend=self.backend, device=self.device,
                            python=python or self.python, max_items_per_worker=self.max_items_per_worker,
                            max_rss_mb=self.max_rss_mb, extra_modules=list(extra_modules or []))


@dataclass
class GitHubSettings:
    repo: str | None = None                  # OWNER/NAME
    base_url: str = "https://api.github.com"
    token: str | None = None                 # env FLAGSWEEP_GITHUB_TOKEN
    app_id: int | None = None                # GitHub App auth instead of a token
    private_key_path: str | None = None
    private_key: str | None = None           # env FLAGSWEEP_GITHUB_APP_KEY
    installation_id: int | None = None
    bot_login: str = ""                      # the login the bot writes as ("": the credentials' own login)
    mutation_interval: float = 1.0           # seconds between writes
    max_retries: int = 5
    max_wait: float = 300.0                  # longest single wait for a rate limit
    retry_backoff: float = 2.0               # first backoff after a 5xx or a dropped connection (doubles)
    request_timeout: int = 30                # seconds per HTTP request

    @property
    def has_credentials(self) -> bool:
        return bool(self.token or (self.app_id and (self.private_key or self.private_key_path) and self.installation_id))


@dataclass
class IssueSettings:
    verify_nightlies: int = 2         # consecutive nightlies every crashing model must compile on before a close
    labels: list[str] = field(default_factory=lambda: ["flagsweep"])
    report_url: str | None = None     # where the full report is published, if anywhere
    dry_run_out: str = "flagsweep-out"
    verify_reproducers: bool = True   # run each tracking issue's reproducer in a fresh interpreter
    repro_timeout: float = 600.0      # seconds per reproducer run
    shrink_budget: float = 600.0      # seconds per issue to shrink its confirmed reproducer (0: embed it unshrunk)


@dataclass
class SchedulerSettings:
    cron: str = "0 3 * * *"
    timezone: str = "UTC"
    misfire_grace_time: int = 3600    # seconds late a nightly may still start (a restart at 03:20 still runs it)
    shutdown_grace: float = 30.0      # seconds a job may take to finish on SIGTERM before it is requeued
    stuck_after: float = 3600.0       # seconds a ready job may wait untaken before /healthz calls it stuck


@dataclass
class WebhookSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    secret: str | None = None        # env FLAGSWEEP_WEBHOOK_SECRET
    max_body: int = 1_000_000        # bytes; a larger delivery gets 413
    drain_limit: int = 16_000_000    # bytes of an oversize body read and discarded so the sender reads its 413
    max_headers: int = 100           # more header fields than this: 431
    read_timeout: float = 10.0       # seconds a sender may pause while sending a body (then 408)
    header_timeout: float = 5.0      # seconds a connection has to send a complete request head, then it is closed
    max_connections: int = 200       # open connections at most
    max_per_peer: int = 20           # open connections from one address at most (a proxy in front: raise it)
    reserve: int = 50                # of max_connections, kept for requests being answered (not for slow headers)
    access_log: bool = True          # one line per request on the `flagsweep.access` logger


@dataclass
class CommandSettings:
    handle: str = "@flagsweep-bot"
    allowlist: list[str] = field(default_factory=list)
    min_permission: str = "triage"
    rate_limit: int = 5              # commands per user per hour
    any_issue: bool = False          # accept commands on issues the bot does not own
    permission_ttl: float = 300.0    # seconds a looked-up repository role is trusted
    max_models: int = 50             # most models one `sweep` command may start
    retry_for: float = 3600.0        # seconds a command keeps being retried while GitHub is unavailable
    retry_backoff: float = 30.0      # first wait before a retry (doubles, at most 10 minutes)


@dataclass
class NightlySettings:
    index_url: str = "https://download.pytorch.org/whl/nightly"
    channel: str = "cpu"
    venv_dir: str | None = None      # where per-version venvs are cached
    transformers_pin: str | None = None   # None: the transformers version installed here; "": install none
    configs: list[str] = field(default_factory=lambda: ["capture_scalar_outputs", "capture_dynamic_output_shape_ops"])
    models: list[str] = field(default_factory=list)    # globs; empty: the embedded default corpus
    extra_index_url: str = "https://pypi.org/simple"   # where torch's and transformers' deps come from; "": none
    find_links: list[str] = field(default_factory=list)
    no_deps: bool = False             # install only the wheels named (tests, pre-provisioned runners)
    pip_args: list[str] = field(default_factory=list)
    install_timeout: float = 1800.0   # seconds for one venv install
    torch: str = "nightly"            # what `serve` sweeps each night and on `rerun`: as `nightly --torch` takes it
    range_installs: int = 8           # builds a night's regression-range search may install; 0: no search


@dataclass
class ZooSettings:
    cache_dir: str | None = None     # where older versions kept `zoo check` files (ignored now); default: beside the state file
    check_timeout: float = 120.0     # seconds per model for build + eager forward


@dataclass
class Settings:
    state_path: Path = field(default_factory=lambda: default_state_path(os.environ))
    sweep: SweepSettings = field(default_factory=SweepSettings)
    github: GitHubSettings = field(default_factory=GitHubSettings)
    issues: IssueSettings = field(default_factory=IssueSettings)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
    commands: CommandSettings = field(default_factory=CommandSettings)
    nightly: NightlySettings = field(default_factory=NightlySettings)
    zoo: ZooSettings = field(default_factory=ZooSettings)
    routing: list[dict[str, Any]] = field(default_factory=list)   # cc rules, validated by bot.issues.routing
    source: str | None = None        # the settings file read, if any


def _expected(hint: Any) -> tuple[tuple[type, ...], bool]:
    """The TOML value types a field annotation accepts, and whether None is allowed."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        allowed = tuple(a for a in args if a is not type(None))
        return tuple(t for a in allowed for t in _expected(a)[0]), type(None) in args
    origin = typing.get_origin(hint) or hint
    if origin is Path:
        return (str,), False
    return (origin,), False


def _check_type(hint: Any, value: Any, where: str) -> Any:
    """`value` converted to the field's type (int -> float, str -> Path), or a SettingsError naming `where`."""
    accepted, _ = _expected(hint)
    if isinstance(value, bool) and bool not in accepted:
        ok = False
    elif float in accepted and isinstance(value, int):
        value, ok = float(value), True
    else:
        ok = isinstance(value, accepted)
    if ok and isinstance(value, list) and typing.get_args(hint):
        item = typing.get_origin(typing.get_args(hint)[0]) or typing.get_args(hint)[0]
        ok = item is Any or all(isinstance(v, item) for v in value)
    if not ok:
        names = " or ".join(sorted({"a path (string)" if hint is Path else t.__name__ for t in accepted}))
        if isinstance(value, list) and typing.get_args(hint):
            names = f"a list of {typing.get_args(hint)[0].__name__}"
        raise SettingsError(f"{where}: expected {names}, got {type(value).__name__} {value!r}")
    if hint is Path and not value.strip():
        raise SettingsError(f"{where}: is empty")
    return Path(value) if hint is Path else value


# Values a field's type allows but the program cannot use: (test, what it must be).
_LIMITS: dict[str, tuple[Any, str]] = {
    "sweep.timeout": (lambda v: v > 0, "more than 0 seconds"),
    "sweep.workers": (lambda v: v >= 0, "0 (one per core) or more"),
    "sweep.max_rss_mb": (lambda v: v > 0, "more than 0 MB"),
    "sweep.max_items_per_worker": (lambda v: v >= 1, "at least 1"),
    "sweep.confirm_runs": (lambda v: v >= 0, "0 or more"),
    "sweep.backend": (lambda v: v in ("count", "eager", "aot_eager", "inductor"), "count, eager, aot_eager or inductor"),
    "sweep.device": (lambda v: re.match(r"^(cpu|cuda(:\d+)?|mps|xpu(:\d+)?)$", v), "cpu, cuda or cuda:N"),
    "sweep.population": (lambda v: v in POPULATIONS, " or ".join(POPULATIONS)),
    "sweep.python": (lambda v: v.strip(), "an interpreter path"),
    "github.repo": (lambda v: v.count("/") == 1 and all(v.split("/")), "OWNER/NAME"),
    "webhook.port": (lambda v: 0 <= v <= 65535, "a TCP port, 0 to 65535"),
    "webhook.max_body": (lambda v: v > 0, "more than 0 bytes"),
    "nightly.range_installs": (lambda v: 0 <= v <= 64, "0 (no range search) to 64 installs"),
    "issues.verify_nightlies": (lambda v: 1 <= v <= MAX_NIGHTS, f"1 to {MAX_NIGHTS} nightlies"),
    "webhook.drain_limit": (lambda v: v >= 0, "0 or more bytes"),
    "webhook.max_headers": (lambda v: v >= 1, "at least 1"),
    "webhook.read_timeout": (lambda v: v > 0, "more than 0 seconds"),
    "webhook.header_timeout": (lambda v: v > 0, "more than 0 seconds"),
    "webhook.max_connections": (lambda v: v >= 2, "at least 2"),
    "webhook.max_per_peer": (lambda v: v >= 1, "at least 1"),
    "webhook.reserve": (lambda v: v >= 1, "at least 1"),
    "commands.retry_for": (lambda v: v >= 0, "0 or more seconds"),
    "commands.retry_backoff": (lambda v: v > 0, "more than 0 seconds"),
    "scheduler.stuck_after": (lambda v: v > 0, "more than 0 seconds"),
    "issues.repro_timeout": (lambda v: v > 0, "more than 0 seconds"),
    "issues.shrink_budget": (lambda v: v >= 0, "0 or more seconds (0: no shrinking)"),
    "zoo.check_timeout": (lambda v: v > 0, "more than 0 seconds"),
}


def _fill(obj: Any, data: Mapping[str, Any], where: str, section: str = "") -> None:
    """Copy `data` onto dataclass `obj`, checking names, types (from the annotations) and limits."""
    known = {f.name: f for f in fields(obj)}
    hints = typing.get_type_hints(type(obj))
    for key, value in data.items():
        if key not in known:
            raise SettingsError(f"{where}: unknown setting {key!r} (known: {', '.join(sorted(known))})")
        current = getattr(obj, key)
        if is_dataclass(current):
            if not isinstance(value, dict):
                raise SettingsError(f"{where}.{key}: expected a table")
            _fill(current, value, f"{where}.{key}", key)
            continue
        value = _check_type(hints[key], value, f"{where}.{key}")
        name = f"{section}.{key}" if section else key
        if name in _LIMITS and not _LIMITS[name][0](value):
            raise SettingsError(f"{where}.{key}: must be {_LIMITS[name][1]}, got {value!r}")
        setattr(obj, key, value)


def load(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Build the Settings from a TOML file (optional) and the environment."""
    env = os.environ if env is None else env
    settings = Settings(state_path=default_state_path(env))
    path = path or env.get("FLAGSWEEP_SETTINGS")
    if path:
        p = Path(path)
        try:
            data = read_toml(p, "settings file")
        except UnreadableFile as exc:
            raise SettingsError(str(exc)) from None
        settings.source = str(p)
        routing = data.pop("routing", None)
        if routing is not None:
            rules = routing.get("rule", []) if isinstance(routing, dict) else routing
            if not isinstance(rules, list):
                raise SettingsError(f"{p}: [routing] must hold [[routing.rule]] tables")
            settings.routing = rules
        _fill(settings, data, str(p))
    if env.get("FLAGSWEEP_STATE"):
        settings.state_path = Path(env["FLAGSWEEP_STATE"])
    if env.get("FLAGSWEEP_GITHUB_TOKEN"):
        settings.github.token = env["FLAGSWEEP_GITHUB_TOKEN"]
    if env.get("FLAGSWEEP_GITHUB_APP_KEY"):
        settings.github.private_key = env["FLAGSWEEP_GITHUB_APP_KEY"]
    if env.get("FLAGSWEEP_WEBHOOK_SECRET"):
        settings.webhook.secret = env["FLAGSWEEP_WEBHOOK_SECRET"]
    if env.get("FLAGSWEEP_REPO"):
        settings.github.repo = env["FLAGSWEEP_REPO"]
    return settings
