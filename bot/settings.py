"""Settings: read and validated once, into one typed object that is passed down.

This is the only module that reads environment variables. Sources, later wins:
built-in defaults < the TOML settings file (--settings or FLAGSWEEP_SETTINGS)
< environment variables (secrets) < command-line flags (applied by the CLI, as a new object).
Each feature reads its own section; each field declares the check its value must pass (`setting`),
and a bad value is a SettingsError naming it. `load` makes the path fields absolute, and the
object it returns is frozen: nothing downstream changes it.
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from harness.core.files import UnreadableFile, read_toml
from harness.core.fixes import MAX_NIGHTS
from harness.core import modes as modes_mod
from harness.core.modes import Mode, ModeError
from harness.core.options import ATOL, RTOL, Accuracy, SweepOptions
from harness.core.population import POPULATIONS

log = logging.getLogger(__name__)

# The configs with a summary issue by default: the built-in flags. A named set (`--configs all-dynamo`) adds a
# config per flag; those are summed up in the report's readiness table, not in one issue each.
SUMMARY_CONFIGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops")

ROLES = ("none", "read", "triage", "write", "maintain", "admin")   # repository roles, lowest first
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}(\[bot\])?$")
_URL_TEXT = re.compile(r"^(https?|file)://\S+$")
_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}/[A-Za-z0-9._-]{1,100}$")

T = TypeVar("T")


class SettingsError(ValueError):
    """The settings file or environment is wrong; the message says where."""


def repo_key(text: str) -> str | None:
    """OWNER/NAME as GitHub compares it (case-insensitively: lower case), or None when text is not OWNER/NAME.

    The one rule for a repository name: the settings, `publish --repo`, `stats --repo` and the webhook use it."""
    return text.lower() if _REPO.match(text) else None


def default_state_path(env: Mapping[str, str]) -> Path:
    """Where the store lives unless told otherwise."""
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", ".")) / ".local" / "share")
    return Path(base) / "flagsweep" / "state.sqlite"


def absolute(text: str) -> str:
    """text as an absolute path: `~` expanded, joined to the current directory, `..` folded; symlinks kept."""
    return os.path.abspath(os.path.expanduser(text))


def named_path(text: str) -> bool:
    """True when text names a path (it has a folder separator) rather than a command or a version."""
    return os.sep in text or (os.altsep is not None and os.altsep in text) or text.startswith("~")


@dataclass(frozen=True)
class Check:
    """What a value must be beyond its type (the annotation): a test, and the words for what passes it."""
    test: Callable[[Any], Any]
    what: str

    def passes(self, value: Any) -> bool:
        """True when value passes the test."""
        return bool(self.test(value))


def at_least(low: float, unit: str = "") -> Check:
    """value >= low."""
    return Check(lambda v: v >= low, f"at least {low:g}{unit}")


def more_than(low: float, unit: str = "") -> Check:
    """value > low."""
    return Check(lambda v: v > low, f"more than {low:g}{unit}")


def between(low: float, high: float, unit: str = "") -> Check:
    """low <= value <= high."""
    return Check(lambda v: low <= v <= high, f"{low:g} to {high:g}{unit}")


def one_of(*values: str) -> Check:
    """value is one of values."""
    return Check(lambda v: v in values, " or ".join(values))


ANY = Check(lambda v: True, "any value")
TEXT = Check(lambda v: bool(v.strip()), "not empty")
NAMES = Check(lambda v: all(x.strip() for x in v), "a list of non-empty names")
URL = Check(lambda v: _URL_TEXT.match(v), "an http(s):// or file:// URL")
URL_OR_NONE = Check(lambda v: v == "" or _URL_TEXT.match(v), 'an http(s):// URL or "" (none)')
# GitHub splits a label filter (`labels=a,b`) on commas: a label with one can never be looked up.
LABEL = Check(lambda v: v.strip() and v == v.strip() and "," not in v, "a label name without commas or surrounding spaces")
GLOB_CHARS = frozenset("*?[")
# Names looked up literally (a canary is found by its exact name in the night's results): a glob never matches.
EXACT_NAMES = Check(lambda v: all(x.strip() and not GLOB_CHARS & set(x) for x in v),
                    "a list of model class names (no globs: each is looked up by its exact name)")
SOME_NAMES = Check(lambda v: bool(v) and all(x.strip() for x in v), "a list of at least one non-empty name")
_S = " seconds"


class Holds(enum.Enum):
    """What a setting's text is, for `load` to make paths absolute."""
    VALUE = "value"
    PATH = "path"                   # always a file or folder path
    PATH_OR_NAME = "path or name"   # a path when it names one ("../venv/bin/python"), else a command ("python3")


def setting(default: Any = None, check: Check = ANY, *, factory: Callable[[], Any] | None = None,
            holds: Holds = Holds.VALUE, agrees: Check | None = None) -> Any:
    """A field a settings file may set: its default (or factory), the check its value must pass, whether it holds
    a path, and (agrees) a test on its whole section for a value that must agree with another field."""
    meta = {"check": check, "holds": holds, "agrees": agrees}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def section(cls: type) -> Any:
    """A section of the settings file: a table of settings, each declared with `setting`."""
    return field(default_factory=cls, metadata={"section": True})


@dataclass(frozen=True)
class SweepSettings:
    workers: int = setting(0, Check(lambda v: v >= 0, "0 (one per core) or more"))   # 0: one per core
    timeout: float = setting(300.0, more_than(0, _S))                # seconds per item
    backend: str = setting("count", one_of("count", "eager", "aot_eager", "inductor"))
    device: str = setting("cpu", Check(lambda v: re.match(r"^(cpu|cuda(:\d+)?|mps|xpu(:\d+)?)$", v),
                                       "cpu, cuda or cuda:N"))
    max_items_per_worker: int = setting(50, at_least(1))             # recycle a worker after this many items
    max_rss_mb: float = setting(6000.0, more_than(0, " MB"))         # recycle above this RSS; hard limit is 1.5x
    python: str | None = setting(None, Check(lambda v: v.strip(), "an interpreter path"),
                                 holds=Holds.PATH_OR_NAME)           # interpreter for the workers
    config_file: str | None = setting(None, TEXT, holds=Holds.PATH)  # extra named configs (TOML)
    population: str = setting("all", one_of(*POPULATIONS))   # all | graph-breaking: models with >1 graph at baseline
    # share of pruned (model, flag) pairs traced again after a pruned sweep (min 20)
    prune_audit: float = setting(0.05, Check(lambda v: 0 <= v <= 1, "a share between 0 and 1"))
    # the configs named one by one compiled together where their results are equal (later calls included), split
    # where they differ; each equal one stored as the baseline's result, reason `pooled`
    pool_named: bool = setting(True)
    # on a CUDA device: workers per GPU (each capped at 1/gpu_workers of the GPU's memory); `workers` is for CPUs
    gpu_workers: int = setting(2, between(1, 64, " workers per GPU"))
    # Inductor/AOTAutograd cache root shared by the workers (one folder per torch build below it); None: beside the
    # state file (`load` says where); "": no shared cache
    compile_cache: str | None = setting(None, ANY, holds=Holds.PATH)
    # the modes each item runs in beside its flags (harness.core.modes; built-in names or [modes.NAME] tables), one
    # run each; the default, eval alone, is today's sweep
    modes: list[str] = setting(["eval"], SOME_NAMES)

    def options(self, python: str | None = None, extra_modules: list[str] | None = None) -> SweepOptions:
        """The engine's options from these settings (`python`: the workers' interpreter, default the setting)."""
        return SweepOptions(workers=self.workers, timeout=self.timeout, backend=self.backend, device=self.device,
                            python=python or self.python, max_items_per_worker=self.max_items_per_worker,
                            max_rss_mb=self.max_rss_mb, extra_modules=list(extra_modules or []),
                            gpu_workers=self.gpu_workers, compile_cache=self.compile_cache or None)


# A tolerance: a positive, finite number (the loader refuses a non-finite one before this check).
TOLERANCE = Check(lambda v: v > 0, "a positive number (a tolerance)")


@dataclass(frozen=True)
class AccuracySettings:
    """Wrong results and recompiles (harness.engine.scenarios): each item's later calls, judged against eager."""
    enabled: bool = setting(True)               # the later calls and the accuracy oracle; off: the first call only
    rtol: float = setting(RTOL, TOLERANCE)      # relative tolerance of `close` (beyond it: the fp64 arbitration)
    atol: float = setting(ATOL, TOLERANCE)      # absolute tolerance of `close`
    # later calls answered from the baseline where nothing about the flag can change them (the first call still made)
    answer: bool = setting(True)
    # share of the answered items the night's audit traces again in full, seeded by the night; at least answer_audit_min
    answer_audit: float = setting(0.05, Check(lambda v: 0 <= v <= 1, "a share between 0 and 1"))
    answer_audit_min: int = setting(2, at_least(0))
    # nights after an audit disagreement that the rule stays off for that flag (each quarantine keeps its own count)
    answer_quarantine: int = setting(7, at_least(0))

    def options(self) -> Accuracy:
        """The engine's plain-data form."""
        return Accuracy(enabled=self.enabled, rtol=self.rtol, atol=self.atol, answer=self.answer,
                        answer_audit=self.answer_audit, answer_audit_min=self.answer_audit_min,
                        answer_quarantine=self.answer_quarantine)


@dataclass(frozen=True)
class GitHubSettings:
    repo: str | None = setting(None, Check(lambda v: repo_key(v) is not None, "OWNER/NAME"))
    base_url: str = setting("https://api.github.com", URL)
    token: str | None = setting(None, TEXT)                  # env FLAGSWEEP_GITHUB_TOKEN
    app_id: int | None = setting(None, at_least(1))          # GitHub App auth instead of a token
    private_key_path: str | None = setting(None, TEXT, holds=Holds.PATH)
    private_key: str | None = setting(None, TEXT)            # env FLAGSWEEP_GITHUB_APP_KEY
    installation_id: int | None = setting(None, at_least(1))
    # the login the bot writes as ("": the credentials' own login)
    bot_login: str = setting("", Check(lambda v: v == "" or _LOGIN.match(v),
                                       'a GitHub login, or "" (the credentials\' own)'))
    mutation_interval: float = setting(1.0, between(0, 60, _S))   # seconds between writes
    max_retries: int = setting(5, between(0, 20, " retries"))
    max_wait: float = setting(300.0, between(1, 3600, _S))        # longest single wait for a rate limit
    # first backoff after a 5xx or a dropped connection (doubles); 0: retry at once (tests, a local GitHub Enterprise)
    retry_backoff: float = setting(2.0, between(0, 600, _S))
    request_timeout: int = setting(30, between(1, 600, _S))       # seconds per HTTP request

    @property
    def has_credentials(self) -> bool:
        return bool(self.token or (self.app_id and (self.private_key or self.private_key_path) and self.installation_id))


@dataclass(frozen=True)
class IssueSettings:
    # consecutive nightlies every crashing model must compile on before a close
    verify_nightlies: int = setting(2, between(1, MAX_NIGHTS, " nightlies"))
    labels: list[str] = setting(["flagsweep"], NAMES)
    report_url: str | None = setting(None, URL)           # where the full report is published, if anywhere
    dry_run_out: str = setting("flagsweep-out", TEXT, holds=Holds.PATH)
    # new tracking issues filed per publish; the rest wait, by leverage (pending)
    max_new_per_night: int = setting(5, at_least(0, " issues"))
    max_open: int = setting(25, at_least(0, " issues"))   # open tracking issues at most; new ones wait meanwhile
    # "what changed" comments per issue per day; later changes: body only
    max_comments_per_issue_per_day: int = setting(1, at_least(0, " comments"))
    min_models: int = setting(2, at_least(1, " models"))  # a new signature is filed once it crashes this many models...
    # ...or was seen on this many consecutive nightlies (and a crash is confirmed)
    min_nights: int = setting(2, between(1, MAX_NIGHTS, " nightlies"))
    pause_label: str = setting("flagsweep: pause", LABEL)  # an open issue with this label stops every write
    shadow: bool = setting(False)      # read GitHub, but write the planned actions to files instead of GitHub
    # added when dynamic=False makes the reproducer pass ("": none)
    dynamic_label: str = setting("module: dynamic shapes",
                                 Check(lambda v: v == v.strip() and "," not in v,
                                       'a label name without commas or surrounding spaces, or "" (none)'))
    # names or globs with a summary issue
    summary_configs: list[str] = setting(list(SUMMARY_CONFIGS), NAMES)


@dataclass(frozen=True)
class SchedulerSettings:
    cron: str = setting("0 3 * * *", TEXT)
    timezone: str = setting("UTC", TEXT)
    # seconds late a nightly may still start (a restart at 03:20 still runs it)
    misfire_grace_time: int = setting(3600, at_least(0, _S))
    shutdown_grace: float = setting(30.0, at_least(0, _S))   # seconds a job may take on SIGTERM before it is requeued
    stuck_after: float = setting(3600.0, more_than(0, _S))   # seconds a ready job may wait untaken: /healthz says stuck


@dataclass(frozen=True)
class WebhookSettings:
    host: str = setting("127.0.0.1", TEXT)
    port: int = setting(8080, Check(lambda v: 0 <= v <= 65535, "a TCP port, 0 to 65535"))
    secret: str | None = setting(None, TEXT)                # env FLAGSWEEP_WEBHOOK_SECRET
    max_body: int = setting(1_000_000, more_than(0, " bytes"))   # bytes; a larger delivery gets 413
    # bytes of an oversize body read and discarded so the sender reads its 413
    drain_limit: int = setting(16_000_000, at_least(0, " bytes"),
                               agrees=Check(lambda w: w.drain_limit >= w.max_body, "max_body or more"))
    max_headers: int = setting(100, at_least(1))            # more header fields than this: 431
    read_timeout: float = setting(10.0, more_than(0, _S))   # seconds a sender may pause while sending a body (408)
    # seconds a connection has to send a complete request head, then it is closed
    header_timeout: float = setting(5.0, more_than(0, _S))
    max_connections: int = setting(200, at_least(2))        # open connections at most
    max_per_peer: int = setting(20, at_least(1))   # open connections from one address (a proxy in front: raise it)
    # of max_connections, kept for requests being answered (not for slow headers)
    reserve: int = setting(50, at_least(1),
                           agrees=Check(lambda w: w.reserve < w.max_connections, "less than max_connections"))
    access_log: bool = setting(True)               # one line per request on the `flagsweep.access` logger


@dataclass(frozen=True)
class CommandSettings:
    handle: str = setting("@flagsweep-bot", Check(lambda v: v.startswith("@") and _LOGIN.match(v[1:]),
                                                  "@ and a GitHub login"))
    allowlist: list[str] = setting([], Check(lambda v: all(_LOGIN.match(x) for x in v), "a list of GitHub logins"))
    min_permission: str = setting("triage", one_of(*ROLES))
    # units per user per hour: a command that starts work, a refusal, a usage or a paused reply (help, status: free)
    rate_limit: int = setting(5, between(1, 1000, " units an hour"))
    any_issue: bool = setting(False)               # accept commands on issues the bot does not own
    permission_ttl: float = setting(300.0, at_least(0, _S))   # seconds a looked-up repository role is trusted
    max_models: int = setting(50, between(1, 10_000, " models"))   # most models one `sweep` command may start
    # most commands one comment may hold; the rest are not run, and the comment's one reply says so
    max_per_comment: int = setting(10, between(1, 100, " commands a comment"))
    # seconds a command keeps being retried while GitHub is unavailable
    retry_for: float = setting(3600.0, Check(lambda v: v >= 0, "0 or more seconds"))
    retry_backoff: float = setting(30.0, more_than(0, _S))   # first wait before a retry (doubles, at most 10 minutes)


@dataclass(frozen=True)
class NightlySettings:
    index_url: str = setting("https://download.pytorch.org/whl/nightly", URL)
    channel: str = setting("cpu")
    venv_dir: str | None = setting(None, TEXT, holds=Holds.PATH)   # where per-version venvs are cached
    transformers_pin: str | None = setting(None)   # None: the transformers version installed here; "": install none
    # at least one: an empty list would sweep only the baseline every night
    configs: list[str] = setting(["capture_scalar_outputs", "capture_dynamic_output_shape_ops"], SOME_NAMES)
    models: list[str] = setting([], NAMES)         # globs; empty: the embedded default corpus
    # where torch's and transformers' deps come from; "": none
    extra_index_url: str = setting("https://pypi.org/simple", URL_OR_NONE)
    find_links: list[str] = setting([], NAMES)
    no_deps: bool = setting(False)                 # install only the wheels named (tests, pre-provisioned runners)
    pip_args: list[str] = setting([])
    install_timeout: float = setting(1800.0, more_than(0, _S))   # seconds for one venv install
    # what `serve` sweeps each night and on `rerun`: as `nightly --torch` takes it
    torch: str = setting("nightly", TEXT)
    # Models that must build, run eager and compile at baseline every night, or nothing is filed (the gate);
    # swept with the night when its models lack them. Cheap and well-behaved, one per stratum.
    canaries: list[str] = setting(["GPT2Model", "BartModel", "ViTModel"], EXACT_NAMES)
    # a rise of the share of models failing at baseline past this: environment suspect
    max_error_jump: float = setting(0.15, Check(lambda v: 0 < v <= 1,
                                                "more than 0 and at most 1 (a share of the models)"))


@dataclass(frozen=True)
class VerifySettings:
    """The verify step (bot.verify): each tracking group's reproducer verified, shrunk and isolated."""
    enabled: bool = setting(True)        # run each tracking issue's reproducer in a fresh interpreter
    timeout: float = setting(600.0, more_than(0, _S))   # seconds per reproducer run
    # seconds per issue to shrink its confirmed reproducer (0: embed it unshrunk)
    shrink_budget: float = setting(150.0, Check(lambda v: v >= 0, "0 or more seconds (0: no shrinking)"))
    # wall-clock minutes the verify step may take per night; the rest waits (pending)
    max_minutes: float = setting(30.0, more_than(0, " minutes"))


@dataclass(frozen=True)
class ConfirmSettings:
    """Flake confirmation (bot.pipeline.flake): new crashes and fixes re-run in fresh workers."""
    runs: int = setting(2, between(0, 20, " re-runs"))   # re-runs per new crash or fix; 0: no confirmation


@dataclass(frozen=True)
class RangeSettings:
    """The regression-range search (bot.ranges): the nightlies between two runs bisected."""
    # builds a night's regression-range search may install; 0: no search
    installs: int = setting(8, between(0, 64, " installs (0: no range search)"))


@dataclass(frozen=True)
class CulpritSettings:
    """From a nightly range to the commit (bot.ranges.culprit): suspects ranked, Python-only stretches bisected."""
    enabled: bool = setting(True)        # rank suspects (and bisect, where a checkout is set) for each new crash
    # a local git checkout of pytorch, kept up to date by the runner's workflow; "": none (no overlay bisection)
    checkout: str = setting("", holds=Holds.PATH)
    max_minutes: float = setting(20.0, more_than(0, " minutes"))   # wall-clock minutes per night for bisections
    runs: int = setting(3, between(3, 20, " runs per probe"))       # each probe's reproducer runs (at least 3)
    # the share of a probe's runs that must agree for it to count; under it the reproducer is flaky: no culprit
    confidence: float = setting(1.0, between(0.66, 1.0, " (a share of a probe's runs)"))
    max_commits: int = setting(500, between(1, 100_000, " commits"))   # a longer commit range is refused
    # where the commits come from through GitHub's compare when no checkout is set
    repo: str = setting("pytorch/pytorch", Check(lambda v: bool(_REPO.match(v)), "OWNER/NAME"))


@dataclass(frozen=True)
class ZooSettings:
    # where older versions kept `zoo check` files (ignored now); default: beside the state file
    cache_dir: str | None = setting(None, TEXT, holds=Holds.PATH)
    check_timeout: float = setting(120.0, more_than(0, _S))   # seconds per model for build + eager forward


@dataclass(frozen=True)
class Settings:
    state_path: Path = setting(factory=lambda: default_state_path(os.environ), holds=Holds.PATH)
    sweep: SweepSettings = section(SweepSettings)
    github: GitHubSettings = section(GitHubSettings)
    issues: IssueSettings = section(IssueSettings)
    scheduler: SchedulerSettings = section(SchedulerSettings)
    webhook: WebhookSettings = section(WebhookSettings)
    commands: CommandSettings = section(CommandSettings)
    nightly: NightlySettings = section(NightlySettings)
    zoo: ZooSettings = section(ZooSettings)
    verify: VerifySettings = section(VerifySettings)
    confirm: ConfirmSettings = section(ConfirmSettings)
    ranges: RangeSettings = section(RangeSettings)
    culprit: CulpritSettings = section(CulpritSettings)
    accuracy: AccuracySettings = section(AccuracySettings)
    routing: list[dict[str, Any]] = field(default_factory=list)   # cc rules, validated by bot.issues.routing
    # every mode known by name: the built-in ones and the file's [modes.NAME] tables (harness.core.modes.named)
    modes: dict[str, Mode] = field(default_factory=lambda: dict(modes_mod.BUILTIN))
    source: str | None = None        # the settings file read, if any

    def sweep_options(self, python: str | None = None, extra_modules: list[str] | None = None) -> SweepOptions:
        """The engine's options: [sweep] with [accuracy] (`python`: the workers' interpreter, default the setting)."""
        return dataclasses.replace(self.sweep.options(python, extra_modules), accuracy=self.accuracy.options())

    def sweep_modes(self, names: list[str] | None = None) -> list[Mode]:
        """The modes to sweep: `names` (a command's `--modes`), else `[sweep] modes`; SettingsError naming an
        unknown one."""
        try:
            return modes_mod.resolve(list(names or self.sweep.modes), self.modes)
        except ModeError as exc:
            where = "--modes" if names else f"{self.source or 'settings'}: [sweep] modes"
            raise SettingsError(f"{where}: {exc}") from None

    def compile_cache_refusal(self) -> str | None:
        """Why `[sweep] compile_cache` cannot hold the shared compile cache (a file; a folder that cannot be created
        or written), or None; asked only where [sweep] backend is inductor, the one backend that uses it. Checked
        before anything runs (no worker has to start to find out), and nothing is created here."""
        root = self.sweep.options().shared_cache
        why = _unusable_folder(Path(root)) if root else None
        if why is None:
            return None
        return f"{self.source or 'settings'}: [sweep] compile_cache = {root!r}: {why} (\"\" for none)"

    def at_state(self, state_path: Path) -> "Settings":
        """These settings with the store at `state_path` (`--state`): a compile cache that was the default one,
        beside the old store, moves beside the new one."""
        sweep = self.sweep
        if sweep.compile_cache == default_compile_cache(self.state_path):
            sweep = dataclasses.replace(sweep, compile_cache=default_compile_cache(state_path))
        return dataclasses.replace(self, state_path=state_path, sweep=sweep)


def _unusable_folder(path: Path) -> str | None:
    """Why `path` cannot be a folder this process writes in (made when first used), or None."""
    if path.exists():
        if not path.is_dir():
            return "is a file, not a folder"
        return None if os.access(path, os.W_OK | os.X_OK) else "cannot be written"
    parent = next(p for p in path.parents if p.exists())     # the root always exists
    if not parent.is_dir():
        return f"cannot be created: {parent} is a file"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"cannot be created in {parent} (not writable)"


def default_compile_cache(state_path: Path) -> str:
    """Where the shared compile cache lives unless told otherwise: beside the store."""
    return absolute(str(Path(state_path).parent / "compile-cache"))


# Settings that moved to their feature's own section: (old section, old key, new section, new key). The old
# place still works for one release, with a warning; setting both is an error.
MOVED: tuple[tuple[str, str, str, str], ...] = (
    ("issues", "verify_reproducers", "verify", "enabled"),
    ("issues", "repro_timeout", "verify", "timeout"),
    ("issues", "shrink_budget", "verify", "shrink_budget"),
    ("sweep", "confirm_runs", "confirm", "runs"),
    ("nightly", "range_installs", "ranges", "installs"),
)


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


def _checked(f: dataclasses.Field, hint: Any, value: Any, where: str) -> Any:
    """A file's value for field f: its type, a finite number, then the field's own check."""
    value = _check_type(hint, value, where)
    if isinstance(value, float) and not math.isfinite(value):
        raise SettingsError(f"{where}: must be a finite number, got {value!r}")
    check: Check = f.metadata["check"]
    if value is not None and not check.passes(value):
        raise SettingsError(f"{where}: must be {check.what}, got {value!r}")
    return value


def settable(cls: type) -> dict[str, dataclasses.Field]:
    """The fields of a settings dataclass a file may set (sections and settings), by name."""
    return {f.name: f for f in fields(cls) if "check" in f.metadata or "section" in f.metadata}


def checks(cls: type = Settings, prefix: str = "") -> dict[str, Check]:
    """Every setting a file may set ("section.field"), with its declared check."""
    hints = typing.get_type_hints(cls)
    found: dict[str, Check] = {}
    for name, f in settable(cls).items():
        if "section" in f.metadata:
            found.update(checks(hints[name], f"{prefix}{name}."))
        else:
            found[prefix + name] = f.metadata["check"]
    return found


def _build(cls: type[T], data: Mapping[str, Any], where: str) -> T:
    """An instance of settings dataclass `cls` from a file's table, each value checked by its field."""
    known = settable(cls)
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            raise SettingsError(f"{where}: unknown setting {key!r} (known: {', '.join(sorted(known))})")
        if "section" not in known[key].metadata:
            values[key] = _checked(known[key], hints[key], value, f"{where}.{key}")
        elif not isinstance(value, dict):
            raise SettingsError(f"{where}.{key}: expected a table")
        else:
            values[key] = _build(hints[key], value, f"{where}.{key}")
    built = cls(**values)
    _check_agreement(built, where)
    return built


def _check_agreement(obj: Any, where: str) -> None:
    """The fields that must agree with another one; a SettingsError names the first that does not."""
    for f in fields(obj):
        agrees: Check | None = f.metadata.get("agrees")
        if agrees is not None and not agrees.passes(obj):
            raise SettingsError(f"{where}.{f.name}: must be {agrees.what}, got {getattr(obj, f.name)!r}")


def _move_deprecated(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The file's tables with each setting that moved (MOVED) at its new place, warning once per old key."""
    moved = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}
    for old_section, old_key, new_section, new_key in MOVED:
        old = moved.get(old_section)
        if not isinstance(old, dict) or old_key not in old:
            continue
        new = moved.setdefault(new_section, {})
        if not isinstance(new, dict):
            continue     # _build names the section that is not a table
        if new_key in new:
            raise SettingsError(f"{where}: [{old_section}] {old_key} and [{new_section}] {new_key} are the same "
                                f"setting; keep only [{new_section}] {new_key}")
        log.warning("settings: [%s] %s is deprecated; use [%s] %s", old_section, old_key, new_section, new_key)
        new[new_key] = old.pop(old_key)
    return moved


def _absolute(value: Any, holds: Holds) -> Any:
    """A path setting joined to the current directory (a name such as "python3" stays a name)."""
    if isinstance(value, Path):
        return Path(absolute(str(value)))
    if not isinstance(value, str) or not value:
        return value
    if holds is Holds.PATH or (holds is Holds.PATH_OR_NAME and named_path(value)):
        return absolute(value)
    return value


def _with_absolute_paths(obj: T) -> T:
    """A copy of settings dataclass `obj` with every field that holds a path (its declaration says so) absolute."""
    changes: dict[str, Any] = {}
    for f in fields(obj):     # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if "section" in f.metadata:
            changes[f.name] = _with_absolute_paths(value)
        elif f.metadata.get("holds", Holds.VALUE) is not Holds.VALUE:
            changes[f.name] = _absolute(value, f.metadata["holds"])
    return dataclasses.replace(obj, **changes)   # type: ignore[type-var]


def _read_modes(data: dict[str, Any], p: Path) -> dict[str, Mode]:
    """The named modes: the built-in ones and the file's [modes.NAME] tables (popped from `data`)."""
    tables = data.pop("modes", {})
    if not isinstance(tables, dict):
        raise SettingsError(f"{p}: [modes] must hold [modes.NAME] tables")
    try:
        return modes_mod.named(tables, f"{p}: modes")
    except ModeError as exc:
        raise SettingsError(str(exc)) from None


def _read_file(p: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The settings file's tables and its cc routing rules (checked by bot.issues.routing)."""
    try:
        data = read_toml(p, "settings file")
    except UnreadableFile as exc:
        raise SettingsError(str(exc)) from None
    routing = data.pop("routing", None)
    if routing is None:
        return data, []
    rules = routing.get("rule", []) if isinstance(routing, dict) else routing
    if not isinstance(rules, list):
        raise SettingsError(f"{p}: [routing] must hold [[routing.rule]] tables")
    return data, rules


def _from_environment(settings: Settings, env: Mapping[str, str]) -> Settings:
    """The settings with the secrets and overrides the environment holds."""
    github, webhook = {}, {}
    if env.get("FLAGSWEEP_GITHUB_TOKEN"):
        github["token"] = env["FLAGSWEEP_GITHUB_TOKEN"]
    if env.get("FLAGSWEEP_GITHUB_APP_KEY"):
        github["private_key"] = env["FLAGSWEEP_GITHUB_APP_KEY"]
    if env.get("FLAGSWEEP_REPO"):
        github["repo"] = env["FLAGSWEEP_REPO"]
    if env.get("FLAGSWEEP_WEBHOOK_SECRET"):
        webhook["secret"] = env["FLAGSWEEP_WEBHOOK_SECRET"]
    state = Path(env["FLAGSWEEP_STATE"]) if env.get("FLAGSWEEP_STATE") else settings.state_path
    return dataclasses.replace(settings, state_path=state, github=dataclasses.replace(settings.github, **github),
                               webhook=dataclasses.replace(settings.webhook, **webhook))


def load(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Build the Settings from a TOML file (optional) and the environment; path settings made absolute."""
    env = os.environ if env is None else env
    path = path or env.get("FLAGSWEEP_SETTINGS")
    settings = Settings(state_path=default_state_path(env))
    if path:
        p = Path(path)
        data, rules = _read_file(p)
        named = _read_modes(data, p)
        data = _move_deprecated(data, str(p))
        # the default store path from `env`, not from the os.environ that Settings() would read
        data.setdefault("state_path", str(settings.state_path))
        settings = dataclasses.replace(_build(Settings, data, str(p)), routing=rules, source=str(p), modes=named)
        settings.sweep_modes()     # [sweep] modes checked once, here: each names a known mode
    settings = _with_absolute_paths(_from_environment(settings, env))
    if settings.sweep.compile_cache is None:
        settings = dataclasses.replace(settings, sweep=dataclasses.replace(
            settings.sweep, compile_cache=default_compile_cache(settings.state_path)))
    return settings
