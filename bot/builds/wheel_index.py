"""A PEP 503 index of torch wheels: parse its page, read wheel names, pick a build by date or version.

PyTorch's nightly, test and release channels serve one `<a href>` per file, and so
does a PyPI-style simple index. A nightly is known by its version
(`2.14.0.dev20261121+cpu`), whose dev number is its date.
"""
from __future__ import annotations

import html.parser
import re
from dataclasses import dataclass
from datetime import date as date_cls
from pathlib import Path
from typing import Iterable
from urllib.parse import unquote, urljoin, urlsplit

from packaging.tags import Tag, sys_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from bot.settings import NightlySettings

_DEV_DATE = re.compile(r"^(\d{4})(\d{2})(\d{2})$")


class ProviderError(RuntimeError):
    """A nightly could not be found or installed; the message is the run's failure reason."""


@dataclass(frozen=True)
class Wheel:
    """One torch wheel file on the index."""

    filename: str
    url: str
    version: str
    date: str | None           # YYYY-MM-DD of a dev build
    tags: frozenset[Tag]


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def dev_date(version: str) -> str | None:
    """YYYY-MM-DD from a dev version's number (`2.14.0.dev20261121+cpu` → 2026-11-21), else None."""
    m = re.search(r"\.dev(\d{8})", version)
    if not m:
        return None
    y, mo, d = _DEV_DATE.match(m.group(1)).groups()
    try:
        return date_cls(int(y), int(mo), int(d)).isoformat()
    except ValueError:
        return None


def parse_wheel(filename: str, url: str) -> Wheel | None:
    """A Wheel from a file name on the index, or None for anything that is not a wheel."""
    try:
        _name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return Wheel(filename=filename, url=url, version=str(version), date=dev_date(str(version)), tags=frozenset(tags))


def parse_index(page: str, page_url: str, project: str = "torch") -> list[Wheel]:
    """Wheels of `project` linked from a PEP 503 project page."""
    links = _Links()
    links.feed(page)
    out = []
    for href in links.hrefs:
        url = urljoin(page_url, href)
        # PEP 503 lets the URL carry a hash fragment (#sha256=...); pip checks it, we keep it.
        filename = unquote(Path(urlsplit(url).path).name)
        wheel = parse_wheel(filename, url)
        if wheel and filename.lower().startswith(project.lower().replace("-", "_") + "-"):
            out.append(wheel)
    return out


def project_url(settings: NightlySettings, project: str = "torch") -> str:
    """`<index>/<channel>/<project>/`."""
    base = settings.index_url.rstrip("/")
    if settings.channel:
        base += "/" + settings.channel.strip("/")
    return f"{base}/{project}/"


def list_wheels(settings: NightlySettings, *, client=None, project: str = "torch") -> list[Wheel]:
    """Every torch wheel on the configured index and channel."""
    import httpx

    url = project_url(settings, project)
    own = client is None
    client = client or httpx.Client(timeout=60, follow_redirects=True)
    try:
        resp = client.get(url)
    except httpx.HTTPError as exc:
        raise ProviderError(f"cannot read the nightly index {url}: {exc}") from exc
    finally:
        if own:
            client.close()
    if resp.status_code != 200:
        raise ProviderError(f"nightly index {url} answered HTTP {resp.status_code}")
    return parse_index(resp.text, str(resp.url), project)


def compatible(wheels: Iterable[Wheel], tags: list[Tag] | None = None) -> list[tuple[int, Wheel]]:
    """(priority, wheel) for wheels this interpreter can install; lower priority is a better match."""
    tags = list(sys_tags()) if tags is None else tags
    rank = {t: i for i, t in enumerate(tags)}
    out = []
    for w in wheels:
        best = min((rank[t] for t in w.tags if t in rank), default=None)
        if best is not None:
            out.append((best, w))
    return out


def available_dates(wheels: Iterable[Wheel], tags: list[Tag] | None = None) -> list[str]:
    """Sorted dates of the nightlies installable here."""
    return sorted({w.date for _, w in compatible(wheels, tags) if w.date})


def pick(wheels: Iterable[Wheel], date: str | None = None, tags: list[Tag] | None = None) -> Wheel:
    """The wheel for `date` (default: the newest nightly) that best fits this Python and platform."""
    ok = [(p, w) for p, w in compatible(wheels, tags) if w.date]
    if not ok:
        raise ProviderError("no nightly wheel on the index fits this Python and platform")
    if date is None:
        date = max(w.date for _, w in ok)
    same = [(p, w) for p, w in ok if w.date == date]
    if not same:
        near = sorted({w.date for _, w in ok})
        raise ProviderError(f"no nightly for {date}; available: {near[0]} .. {near[-1]} ({len(near)} dates)")
    # Best tag match first; among equals, the highest version (a re-spun nightly).
    same.sort(key=lambda pw: (pw[0], [-int(x) if x.isdigit() else 0 for x in re.split(r"[.+]", pw[1].version)]))
    return same[0][1]


def _version_key(version: str) -> tuple:
    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def pick_version(wheels: Iterable[Wheel], version: str, tags: list[Tag] | None = None) -> Wheel:
    """The wheel of `version` that best fits here; `2.14.1` also matches a local build such as `2.14.1+cpu`."""
    want = Version(version)
    ok = compatible(wheels, tags)
    if not ok:
        raise ProviderError("no torch wheel on the index fits this Python and platform")
    same = [(p, w) for p, w in ok if _matches(w.version, want)]
    if not same:
        near = sorted({w.version for _, w in ok}, key=_version_key)
        raise ProviderError(f"no torch {version} on the index for this Python and platform; "
                            f"available: {near[0]} .. {near[-1]} ({len(near)} builds)")
    same.sort(key=lambda pw: (pw[0], _version_key(pw[1].version)))
    return same[0][1]


def _matches(version: str, want: Version) -> bool:
    try:
        have = Version(version)
    except InvalidVersion:
        return False
    return have == want or (not want.local and have.public == want.public)


def available_builds(wheels: Iterable[Wheel], tags: list[Tag] | None = None) -> list[str]:
    """Every torch version installable here, oldest first (what `bisect` can step over)."""
    return sorted({w.version for _, w in compatible(wheels, tags)}, key=_version_key)


def build_labels(wheels: Iterable[Wheel], tags: list[Tag] | None = None) -> list[str]:
    """Installable builds oldest first, named as `bisect` takes them: a nightly's date, else its version."""
    by_version = {w.version: w for _, w in compatible(wheels, tags)}
    labels = [by_version[v].date or v for v in sorted(by_version, key=_version_key)]
    return list(dict.fromkeys(labels))
