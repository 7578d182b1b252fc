"""`.ci/install-chromium`: the CI step that brings the report's browser test its chromium never breaks CI.

The real apt path was run by hand on a Debian machine (see the issue 12 note); here apt-get is
absent or fails, which a test can arrange without touching the machine.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / ".ci" / "install-chromium"
TOOLS = ("bash", "id", "tail", "env", "cat")


def _path_without_chromium(tmp_path: Path, apt_get: str | None) -> str:
    """A PATH holding only the shell tools the script uses, and `apt-get` as given (None: none)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} not found")
        (bin_dir / tool).symlink_to(found)
    if apt_get is not None:
        stub = bin_dir / "apt-get"
        stub.write_text("#!" + shutil.which("bash") + "\n" + apt_get + "\n")
        stub.chmod(0o755)
    return str(bin_dir)


def _run(tmp_path: Path, apt_get: str | None) -> subprocess.CompletedProcess:
    env = {"PATH": _path_without_chromium(tmp_path, apt_get), "TMPDIR": str(tmp_path), "HOME": str(tmp_path)}
    return subprocess.run([shutil.which("bash"), str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="the no-sudo branch answers first when not root")
def test_no_apt_get_is_said_and_not_fatal(tmp_path):
    res = _run(tmp_path, None)
    assert res.returncode == 0 and "no apt-get here; the browser test will skip" in res.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the no-sudo branch answers first when not root")
def test_a_failing_apt_get_is_said_and_not_fatal(tmp_path):
    res = _run(tmp_path, 'echo "E: Unable to locate package chromium" >&2; exit 100')
    assert res.returncode == 0
    assert "apt-get could not install chromium" in res.stderr and "Unable to locate package" in res.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the no-sudo branch answers first when not root")
def test_apt_get_is_asked_for_chromium_then_retried_after_an_update(tmp_path):
    calls = tmp_path / "calls"
    # A fresh CI image has no package lists: install fails until `apt-get update` has run.
    marker = tmp_path / "updated"
    res = _run(tmp_path, f'echo "$*" >> {calls}; if [ "$1" = update ]; then : > {marker}; exit 0; fi; '
                         f'[ -f {marker} ] || exit 100')
    assert res.returncode == 0 and "could not install" not in res.stderr
    assert calls.read_text().splitlines() == ["install -y --no-install-recommends chromium", "update -q",
                                              "install -y --no-install-recommends chromium"]


def test_non_root_without_sudo_is_said_and_not_fatal(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("running as root: the script installs directly")
    res = _run(tmp_path, None)
    assert res.returncode == 0 and "no root or password-less sudo" in res.stderr
