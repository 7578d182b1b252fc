"""Settings: read and validated once, into one typed object that is passed down.

This is the only module that reads environment variables. Sources, later wins:
built-in defaults < the TOML settings file (--settings or FLAGSWEEP_SETTINGS)
< environment variables (secrets) < command-line flags (applied by the CLI).
Each feature reads its own section; a bad value is a SettingsError naming it.
"""
from __future__ import annotations

import math
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


# The configs with a summary issue by default: the built-in flags. A named set (`--configs all-dynamo`) adds a
# config per flag; those are summed up in the report's readiness table, not in one issue each.
SUMMARY_CONFIGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops")


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
    prune_audit: float = 0.05        # share of pruned (model, flag) pairs traced again after a pruned sweep (min 20)

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
    shrink_budget: float = 150.0      # seconds per issue to shrink its confirmed reproducer (0: embed it unshrunk)
    max_new_per_night: int = 5        # new tracking issues filed per publish; the rest wait, by leverage (pending)
    max_open: int = 25                # open tracking issues at most; new ones wait while this many are open
    max_comments_per_issue_per_day: int = 1   # "what changed" comments per issue per day; later changes: body only
    min_models: int = 2               # a new signature is filed once it crashes this many models...
    min_nights: int = 2               # ...or was seen on this many consecutive nightlies (and a crash is confirmed)
    pause_label: str = "flagsweep: pause"   # an open issue with this label stops every write (the kill switch)
    shadow: bool = False              # read GitHub, but write the planned actions to files instead of GitHub
    dynamic_label: str = "module: dynamic shapes"   # added when dynamic=False makes the reproducer pass ("": none)
    summary_configs: list[str] = field(default_factory=lambda: list(SUMMARY_CONFIGS))   # names or globs with a summary issue


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
    # Models that must build, run eager and compile at baseline every night, or nothing is filed (the gate);
    # swept with the night when its models lack them. Cheap and well-behaved, one per stratum.
    canaries: list[str] = field(default_factory=lambda: ["GPT2Model", "BartModel", "ViTModel"])
    max_error_jump: float = 0.15      # a rise of the share of models failing at baseline past this: environment suspect


@dataclass
class VerifySettings:
    max_minutes: float = 30.0         # wall-clock minutes the verify step may take per night; the rest waits (pending)


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
    verify: VerifySettings = field(default_factory=VerifySettings)
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


ROLES = ("none", "read", "triage", "write", "maintain", "admin")   # repository roles, lowest first
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}(\[bot\])?$")


def _at_least(low: float, unit: str = "") -> tuple[Any, str]:
    return (lambda v: v >= low), f"at least {low:g}{unit}"


def _more_than(low: float, unit: str = "") -> tuple[Any, str]:
    return (lambda v: v > low), f"more than {low:g}{unit}"


def _between(low: float, high: float, unit: str = "") -> tuple[Any, str]:
    return (lambda v: low <= v <= high), f"{low:g} to {high:g}{unit}"


def _one_of(*values: str) -> tuple[Any, str]:
    return (lambda v: v in values), " or ".join(values)


_ANY = (lambda v: True, "any value")
_TEXT = (lambda v: bool(v.strip()), "not empty")
_NAMES = (lambda v: all(x.strip() for x in v), "a list of non-empty names")
_URL = (lambda v: re.match(r"^(https?|file)://\S+$", v), "an http(s):// or file:// URL")
_URL_OR_NONE = (lambda v: v == "" or re.match(r"^(https?|file)://\S+$", v), 'an http(s):// URL or "" (none)')
_S = " seconds"

# Every setting a file may set, with the values the program can use beyond its type (the annotation):
# (test, what it must be). A key not here is unknown; floats must also be finite.
FIELDS: dict[str, tuple[Any, str]] = {
    "state_path": _ANY,
    "sweep.workers": (lambda v: v >= 0, "0 (one per core) or more"),
    "sweep.timeout": _more_than(0, _S),
    "sweep.backend": _one_of("count", "eager", "aot_eager", "inductor"),
    "sweep.device": (lambda v: re.match(r"^(cpu|cuda(:\d+)?|mps|xpu(:\d+)?)$", v), "cpu, cuda or cuda:N"),
    "sweep.max_items_per_worker": _at_least(1),
    "sweep.max_rss_mb": _more_than(0, " MB"),
    "sweep.python": (lambda v: v.strip(), "an interpreter path"),
    "sweep.config_file": _TEXT,
    "sweep.confirm_runs": _between(0, 20, " re-runs"),
    "sweep.population": _one_of(*POPULATIONS),
    "sweep.prune_audit": (lambda v: 0 <= v <= 1, "a share between 0 and 1"),
    "github.repo": (lambda v: v.count("/") == 1 and all(v.split("/")), "OWNER/NAME"),
    "github.base_url": _URL,
    "github.token": _TEXT,
    "github.app_id": _at_least(1),
    "github.private_key_path": _TEXT,
    "github.private_key": _TEXT,
    "github.installation_id": _at_least(1),
    "github.bot_login": (lambda v: v == "" or _LOGIN.match(v), 'a GitHub login, or "" (the credentials\' own)'),
    "github.mutation_interval": _between(0, 60, _S),
    "github.max_retries": _between(0, 20, " retries"),
    "github.max_wait": _between(1, 3600, _S),
    "github.retry_backoff": _between(0, 600, _S),           # 0: retry at once (tests, a local GitHub Enterprise)
    "github.request_timeout": _between(1, 600, _S),
    "issues.verify_nightlies": _between(1, MAX_NIGHTS, " nightlies"),
    "issues.labels": _NAMES,
    "issues.summary_configs": _NAMES,
    "issues.report_url": _URL,
    "issues.dry_run_out": _TEXT,
    "issues.verify_reproducers": _ANY,
    "issues.repro_timeout": _more_than(0, _S),
    "issues.shrink_budget": (lambda v: v >= 0, "0 or more seconds (0: no shrinking)"),
    "issues.max_new_per_night": _at_least(0, " issues"),
    "issues.max_open": _at_least(0, " issues"),
    "issues.max_comments_per_issue_per_day": _at_least(0, " comments"),
    "issues.min_models": _at_least(1, " models"),
    "issues.min_nights": _between(1, MAX_NIGHTS, " nightlies"),
    "issues.pause_label": _TEXT,
    "issues.shadow": _ANY,
    "issues.dynamic_label": (lambda v: v == v.strip() and "," not in v, 'a label name without commas or '
                                                                       'surrounding spaces, or "" (none)'),
    "scheduler.cron": _TEXT,
    "scheduler.timezone": _TEXT,
    "scheduler.misfire_grace_time": _at_least(0, _S),
    "scheduler.shutdown_grace": _at_least(0, _S),
    "scheduler.stuck_after": _more_than(0, _S),
    "webhook.host": _TEXT,
    "webhook.port": (lambda v: 0 <= v <= 65535, "a TCP port, 0 to 65535"),
    "webhook.secret": _TEXT,
    "webhook.max_body": _more_than(0, " bytes"),
    "webhook.drain_limit": _at_least(0, " bytes"),
    "webhook.max_headers": _at_least(1),
    "webhook.read_timeout": _more_than(0, _S),
    "webhook.header_timeout": _more_than(0, _S),
    "webhook.max_connections": _at_least(2),
    "webhook.max_per_peer": _at_least(1),
    "webhook.reserve": _at_least(1),
    "webhook.access_log": _ANY,
    "commands.handle": (lambda v: v.startswith("@") and _LOGIN.match(v[1:]), "@ and a GitHub login"),
    "commands.allowlist": (lambda v: all(_LOGIN.match(x) for x in v), "a list of GitHub logins"),
    "commands.min_permission": _one_of(*ROLES),
    "commands.rate_limit": _between(1, 1000, " commands an hour"),
    "commands.any_issue": _ANY,
    "commands.permission_ttl": _at_least(0, _S),
    "commands.max_models": _between(1, 10_000, " models"),
    "commands.retry_for": (lambda v: v >= 0, "0 or more seconds"),
    "commands.retry_backoff": _more_than(0, _S),
    "nightly.index_url": _URL,
    "nightly.channel": _ANY,
    "nightly.venv_dir": _TEXT,
    "nightly.transformers_pin": _ANY,
    "nightly.configs": _NAMES,
    "nightly.models": _NAMES,
    "nightly.extra_index_url": _URL_OR_NONE,
    "nightly.find_links": _NAMES,
    "nightly.no_deps": _ANY,
    "nightly.pip_args": _ANY,
    "nightly.install_timeout": _more_than(0, _S),
    "nightly.torch": _TEXT,
    "nightly.range_installs": _between(0, 64, " installs (0: no range search)"),
    "nightly.canaries": _NAMES,
    "nightly.max_error_jump": (lambda v: 0 < v <= 1, "more than 0 and at most 1 (a share of the models)"),
    "zoo.cache_dir": _TEXT,
    "zoo.check_timeout": _more_than(0, _S),
    "verify.max_minutes": _more_than(0, " minutes"),
}

# Settings that must agree with another: (field, test on the section, what it must be).
_RELATIONS: list[tuple[str, Any, str]] = [
    ("webhook.drain_limit", lambda w: w.drain_limit >= w.max_body, "max_body or more"),
    ("webhook.reserve", lambda w: w.reserve < w.max_connections, "less than max_connections"),
]


def _fill(obj: Any, data: Mapping[str, Any], where: str, section: str = "") -> None:
    """Copy `data` onto dataclass `obj`, checking names, types (from the annotations) and limits."""
    known = {f.name: f for f in fields(obj)}
    hints = typing.get_type_hints(type(obj))
    for key, value in data.items():
        if key not in known:
            raise SettingsError(f"{where}: unknown setting {key!r} (known: {', '.join(sorted(_settable(section)))})")
        current = getattr(obj, key)
        if is_dataclass(current):
            if not isinstance(value, dict):
                raise SettingsError(f"{where}.{key}: expected a table")
            _fill(current, value, f"{where}.{key}", key)
            continue
        name = f"{section}.{key}" if section else key
        if name not in FIELDS:
            raise SettingsError(f"{where}: unknown setting {key!r} (known: {', '.join(sorted(_settable(section)))})")
        value = _check_type(hints[key], value, f"{where}.{key}")
        if isinstance(value, float) and not math.isfinite(value):
            raise SettingsError(f"{where}.{key}: must be a finite number, got {value!r}")
        if value is not None and not FIELDS[name][0](value):
            raise SettingsError(f"{where}.{key}: must be {FIELDS[name][1]}, got {value!r}")
        setattr(obj, key, value)


def _settable(section: str) -> list[str]:
    """The keys a file may set in `section` ("" for the top level)."""
    names = [n.split(".") for n in FIELDS]
    if not section:
        return [n[0] for n in names if len(n) == 1] + sorted({n[0] for n in names if len(n) == 2})
    return [n[1] for n in names if n[0] == section]


def _check_relations(settings: Settings, where: str) -> None:
    """The settings that must agree with another one; a SettingsError names the first that does not."""
    for name, test, what in _RELATIONS:
        section, key = name.split(".")
        values = getattr(settings, section)
        if not test(values):
            raise SettingsError(f"{where}.{name}: must be {what}, got {getattr(values, key)!r}")


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
        _check_relations(settings, str(p))
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
