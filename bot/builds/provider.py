"""PyTorch builds: find them on a PEP 503 index, install one into a cached venv per version.

The index page for a project (`<index>/<channel>/torch/`) is plain HTML with one
`<a href>` per file; PyTorch's nightly, test and release channels serve exactly
that, and so does a PyPI-style simple index (`<index>/torch/`, no channel). A
nightly is known by its version (`2.14.0.dev20261121+cpu`), whose dev number is
its date. A build is named the way people name them (`parse_spec`): `current`,
`nightly` (the newest dev build), a date, a version (`2.14.1`, `2.15.0rc1`,
`2.15.0.dev20261101`), or the path of a Python interpreter that has torch.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import subprocess
import sys
import venv
from dataclasses import asdict, dataclass
from datetime import date as date_cls
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from packaging.version import InvalidVersion, Version

from bot.settings import NightlySettings
from harness.core.files import write_atomic
from harness.core.record import RecordError, parse
from harness.engine.childline import ChildLineError, last
from harness.core.run_environment import BuildOrigin
from bot.builds.wheel_index import ProviderError, Wheel, dev_date, list_wheels, pick, pick_version, project_url

log = logging.getLogger(__name__)

READY = ".flagsweep-ready"   # written last: a venv without it is half-built and is rebuilt
TORCH_TAG = "FLAGSWEEP_TORCH"
_PROBE = ("import json, torch\n"
          f"print('{TORCH_TAG} ' + json.dumps({{'version': torch.__version__,"
          " 'git': getattr(getattr(torch, 'version', None), 'git_version', None)}))\n")


class SpecError(ValueError):
    """A build name that is none of the accepted forms, or an interpreter that cannot be used (bad input)."""


@dataclass(frozen=True)
class BuildSpec:
    """Which torch to sweep: kind is current | nightly | date | version | python."""

    kind: str
    value: str | None = None

    def __str__(self) -> str:
        return self.value or self.kind


SPEC_HELP = ("current, nightly, a date (YYYY-MM-DD), a version (2.14.1, 2.15.0rc1, 2.15.0.dev20261101) "
             "or the path of a Python interpreter that has torch")


def parse_spec(text: str) -> BuildSpec:
    """A BuildSpec from what a person typed; SpecError names the value when it is none of the forms."""
    text = (text or "").strip()
    if text in ("current", "nightly"):
        return BuildSpec(text)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return BuildSpec("date", date_cls.fromisoformat(text).isoformat())
        except ValueError:
            raise SpecError(f"--torch {text!r}: not a real date") from None
    if "/" in text or text.startswith(("~", ".")):
        path = Path(text).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise SpecError(f"--torch {text!r}: no executable Python interpreter at that path")
        return BuildSpec("python", str(path))
    if re.match(r"^v?\d+\.\d+", text):
        try:
            return BuildSpec("version", str(Version(text)))
        except InvalidVersion:
            pass
    raise SpecError(f"--torch {text!r}: expected {SPEC_HELP}")


@dataclass
class Nightly:
    """A torch build ready to run: its interpreter, version and git commit."""

    version: str
    git: str | None
    python: str
    date: str | None = None
    venv: str | None = None
    wheel_url: str | None = None
    current: bool = False       # the torch already installed here (--torch current)
    index: str | None = None    # the PEP 503 index it came from (None: not installed by us)
    channel: str | None = None  # the channel on that index (nightly/cpu, test/cu128, ...; "" for a PyPI-style index)

    def origin(self) -> BuildOrigin:
        """What the run's environment record keeps of the build beyond what its interpreter reports."""
        return BuildOrigin(index=self.index, channel=self.channel)

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)


def _venv_root(settings: NightlySettings) -> Path:
    """Where the per-version venvs are cached ([nightly] venv_dir, else ~/.cache/flagsweep/venvs)."""
    if settings.venv_dir:
        return Path(settings.venv_dir)
    return Path.home() / ".cache" / "flagsweep" / "venvs"


def venv_python(path: Path) -> Path:
    """The interpreter of a venv."""
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def transformers_requirement(settings: NightlySettings) -> str | None:
    """The transformers requirement to install beside torch: the pin, the version here, or none."""
    pin = settings.transformers_pin
    if pin is None:
        try:
            return f"transformers=={metadata.version('transformers')}"
        except metadata.PackageNotFoundError:
            return None
    pin = pin.strip()
    if pin in ("", "none"):
        return None
    # A bare version is a pin; anything else (a path, a URL, a requirement) goes to pip as is.
    return f"transformers=={pin}" if re.match(r"^\d[\w.+-]*$", pin) else pin


@dataclass(frozen=True)
class TorchProbe:
    """What an interpreter's torch says of itself (the FLAGSWEEP_TORCH line of `_PROBE`)."""

    version: str
    git: str | None = None


def probe(python: str | Path, timeout: float = 300) -> TorchProbe:
    """Ask an interpreter for its torch version and git commit."""
    try:
        proc = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProviderError(f"cannot run {python}: {exc}") from exc
    try:
        return parse(TorchProbe, last(proc.stdout, TORCH_TAG), TORCH_TAG)
    except ChildLineError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ProviderError(f"torch does not import in {python}: {tail[0]}") from None
    except RecordError as exc:
        raise ProviderError(f"{python}: {exc}") from None


def _source_root() -> Path:
    from harness import PROJECT_ROOT
    return PROJECT_ROOT


def install(wheel: Wheel, settings: NightlySettings, *, progress: bool = True) -> Nightly:
    """Install `wheel` (and the transformers pin) into its cached venv; reuse it when already built."""
    root = _venv_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    path = root / ("torch-" + re.sub(r"[^A-Za-z0-9_.+-]", "_", wheel.version))
    # One installer per version at a time: CI shards on one runner share the cache.
    with open(root / (path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = path / READY
        if ready.exists():
            info = json.loads(ready.read_text())
            # A build without a dev date is labelled with the day it is swept, not the day it was installed.
            return Nightly(**{**info, "date": dev_date(info["version"]) or _today()})
        _build_venv(path, wheel, settings, progress)
        info = probe(venv_python(path))
        nightly = Nightly(version=info.version, git=info.git, python=str(venv_python(path)),
                          date=wheel.date or _today(), venv=str(path), wheel_url=wheel.url,
                          index=settings.index_url, channel=settings.channel)
        write_atomic(ready, json.dumps(nightly.to_dict()))
        return nightly


def _build_venv(path: Path, wheel: Wheel, settings: NightlySettings, progress: bool) -> None:
    import shutil

    if path.exists():
        shutil.rmtree(path)   # a half-built venv from an interrupted install
    # No pip inside the venv: the pip running flagsweep installs into it with --python,
    # which saves ensurepip's time and network.
    venv.EnvBuilder(with_pip=False, clear=True).create(path)
    site = next(path.glob("lib/python*/site-packages"), None) or path / "Lib" / "site-packages"
    # Workers run `python -m harness...` in this venv: make flagsweep importable without
    # installing it. A .pth entry is appended after the venv's own site-packages, so the
    # nightly torch and the pinned transformers installed here still win.
    (site / "flagsweep-source.pth").write_text(str(_source_root()) + "\n")
    cmd = [sys.executable, "-m", "pip", "--python", str(venv_python(path)), "install",
           "--disable-pip-version-check", "--no-input"]
    if not progress:
        cmd.append("--quiet")
    index = project_url(settings, "").rstrip("/")
    cmd += ["--index-url", index]
    if settings.extra_index_url:
        cmd += ["--extra-index-url", settings.extra_index_url]
    for link in settings.find_links:
        cmd += ["--find-links", link]
    if settings.no_deps:
        cmd.append("--no-deps")
    cmd += list(settings.pip_args)
    cmd.append(wheel.url)
    req = transformers_requirement(settings)
    if req:
        cmd.append(req)
    log.info("installing torch %s into %s", wheel.version, path)
    try:
        proc = subprocess.run(cmd, stdout=sys.stderr if progress and _has_fd(sys.stderr) else subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=settings.install_timeout)
    except subprocess.TimeoutExpired:
        raise ProviderError(f"installing torch {wheel.version} took over {settings.install_timeout:.0f}s") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "ERROR" in ln] or lines[-3:] or ["no output"]
        raise ProviderError(f"pip could not install torch {wheel.version}: {' '.join(errors[-2:]).strip()}")


def _has_fd(stream) -> bool:
    """Whether pip's progress can go straight to `stream` (a captured stream has no file descriptor)."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def resolve(settings: NightlySettings, date: str | None = None, *, client=None) -> Wheel:
    """The nightly wheel for `date` (default: the newest)."""
    return pick(list_wheels(settings, client=client), date)


def provide(settings: NightlySettings, date: str | None = None, *, client=None, progress: bool = True) -> Nightly:
    """Resolve and install the nightly for `date`; ProviderError on any failure."""
    return install(resolve(settings, date, client=client), settings, progress=progress)


def provide_spec(settings: NightlySettings, spec: BuildSpec, *, client=None, progress: bool = True) -> Nightly:
    """The torch build `spec` names, installed (or found) and probed; ProviderError on any failure."""
    if spec.kind == "current":
        return current(None)
    if spec.kind == "python":
        try:
            return current(spec.value)
        except ProviderError as exc:     # the person named an interpreter that cannot be used: bad input
            raise SpecError(f"--torch {spec.value}: {exc}") from None
    if spec.kind == "version":
        wheel = pick_version(list_wheels(settings, client=client), spec.value)
    else:
        wheel = resolve(settings, spec.value if spec.kind == "date" else None, client=client)
    return install(wheel, settings, progress=progress)


def current(python: str | None = None) -> Nightly:
    """The torch installed for `python` (default: this interpreter), as a Nightly (--torch current)."""
    python = python or sys.executable
    info = probe(python)
    return Nightly(version=info.version, git=info.git, python=python,
                   date=dev_date(info.version) or _today(), current=True)


def _today() -> str:
    """The label of a sweep of a build that has no date of its own (a release, an rc, a local torch)."""
    return datetime.now(timezone.utc).date().isoformat()
