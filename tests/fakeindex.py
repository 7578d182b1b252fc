"""A local PEP 503 index over real HTTP, holding tiny fake `torch` wheels built on the spot.

A fake wheel is a real wheel (zip + dist-info METADATA/WHEEL/RECORD) whose
`torch/__init__.py` carries `__version__` and `torch.version.git_version`, so pip
installs it and the provider's probe reads it like the real thing.
"""
from __future__ import annotations

import base64
import hashlib
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(directory: Path, version: str, git: str, tag: str = "py3-none-any", *,
                project: str = "torch", broken_import: bool = False) -> Path:
    """Write `<project>-<version>-<tag>.whl` into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{project}-{version}-{tag}.whl"
    dist = f"{project}-{version}.dist-info"
    init = (f"raise ImportError('broken build')\n" if broken_import else
            f"__version__ = {version!r}\nfrom . import version\n")
    files = {
        f"{project}/__init__.py": init.encode(),
        f"{project}/version.py": f"__version__ = {version!r}\ngit_version = {git!r}\n".encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: flagsweep-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
    }
    record = [_record_line(n, d) for n, d in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(directory / name, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return directory / name


def write_index(root: Path, channel: str = "cpu", project: str = "torch") -> None:
    """(Re)write `<root>/<channel>/<project>/index.html` linking every wheel in that folder.

    channel "" is a PyPI-style simple index: `<root>/<project>/`.
    """
    folder = (root / channel / project) if channel else root / project
    links = "\n".join(f'<a href="{p.name}#sha256={hashlib.sha256(p.read_bytes()).hexdigest()}">{p.name}</a><br/>'
                      for p in sorted(folder.glob("*.whl")))
    (folder / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}\n</body></html>\n")


class FakeIndex:
    """Serves `root` over HTTP on a free port; `.url` is the index URL (channel folders below it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        handler = partial(_Quiet, directory=str(root))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def add(self, version: str, git: str, tag: str = "py3-none-any", channel: str = "cpu", **kw) -> Path:
        """Build a wheel into the channel and refresh the project page."""
        path = build_wheel((self.root / channel / "torch") if channel else self.root / "torch", version, git, tag, **kw)
        write_index(self.root, channel)
        return path

    def down(self) -> str:
        """Stop serving; returns the URL, which now refuses connections (an index that is down)."""
        self.close()
        return self.url

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002
        pass
