"""The nightly provider against a local PEP 503 index over HTTP, installing small fake wheels into real venvs."""
import dataclasses
import subprocess
import sys

import pytest
from packaging.tags import Tag

from bot.builds.provider import current, install, provide, resolve, transformers_requirement
from bot.builds.wheel_index import (ProviderError, available_dates, dev_date, list_wheels, parse_index, parse_wheel, pick)
from bot.settings import NightlySettings
from harness.core.run_environment import BuildOrigin
from tests.fakeindex import FakeIndex

REAL_NAME = "torch-2.14.0.dev20261121+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CP311_LINUX = [Tag("cp311", "cp311", "manylinux_2_28_x86_64"), Tag("cp311", "abi3", "manylinux_2_28_x86_64"),
               Tag("py3", "none", "any")]


@pytest.fixture
def index(tmp_path):
    idx = FakeIndex(tmp_path / "index")
    yield idx
    idx.close()


def nightly_settings(idx, tmp_path, **kw) -> NightlySettings:
    # Tests never reach the internet: no extra index, no deps, no transformers unless given.
    kw = {"channel": "cpu", **kw}
    return NightlySettings(index_url=idx.url, venv_dir=str(tmp_path / "venvs"),
                           transformers_pin="", extra_index_url="", no_deps=True, pip_args=["--isolated"], **kw)


def test_wheel_names_and_dates():
    w = parse_wheel(REAL_NAME, "https://x/" + REAL_NAME)
    assert w.version == "2.14.0.dev20261121+cpu" and w.date == "2026-11-21"
    assert Tag("cp311", "cp311", "manylinux_2_28_x86_64") in w.tags
    assert parse_wheel("torch-2.14.0.tar.gz", "x") is None
    assert dev_date("2.13.0+cpu") is None and dev_date("2.14.0.dev20261399") is None


def test_parse_index_resolves_relative_links_and_keeps_only_torch():
    page = (f'<a href="/whl/nightly/cpu/{REAL_NAME.replace("+", "%2B")}#sha256=ab">x</a>'
            '<a href="torchvision-0.25.0.dev20261121+cpu-cp311-cp311-linux_x86_64.whl">v</a>'
            '<a href="torch-2.14.0.dev20261120+cpu-cp311-cp311-win_amd64.whl">w</a>')
    wheels = parse_index(page, "https://download.pytorch.org/whl/nightly/cpu/torch/")
    assert [w.filename for w in wheels] == [REAL_NAME, "torch-2.14.0.dev20261120+cpu-cp311-cp311-win_amd64.whl"]
    assert wheels[0].url.startswith("https://download.pytorch.org/whl/nightly/cpu/torch-2.14.0.dev20261121%2Bcpu")
    assert wheels[1].url == "https://download.pytorch.org/whl/nightly/cpu/torch/torch-2.14.0.dev20261120+cpu-cp311-cp311-win_amd64.whl"


def test_pick_matches_python_and_platform_and_date():
    names = ["torch-2.14.0.dev20261121+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
             "torch-2.14.0.dev20261122+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",   # newest, wrong Python
             "torch-2.14.0.dev20261121+cpu-cp311-cp311-win_amd64.whl",
             "torch-2.14.0.dev20261120+cpu-py3-none-any.whl",
             "torch-2.14.0.dev20261120+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    wheels = [parse_wheel(n, n) for n in names]
    assert pick(wheels, tags=CP311_LINUX).filename == names[0]
    # Same date, two fitting wheels: the more specific tag wins.
    assert pick(wheels, "2026-11-20", tags=CP311_LINUX).filename == names[4]
    assert available_dates(wheels, CP311_LINUX) == ["2026-11-20", "2026-11-21"]
    with pytest.raises(ProviderError, match="no nightly for 2026-11-01"):
        pick(wheels, "2026-11-01", tags=CP311_LINUX)
    with pytest.raises(ProviderError, match="fits this Python"):
        pick(wheels[1:2], tags=CP311_LINUX)


def test_transformers_requirement():
    assert transformers_requirement(NightlySettings(transformers_pin="")) is None
    assert transformers_requirement(NightlySettings(transformers_pin="5.23.0")) == "transformers==5.23.0"
    assert transformers_requirement(NightlySettings(transformers_pin="/w/transformers-1-py3-none-any.whl")).endswith(".whl")
    assert transformers_requirement(NightlySettings()).startswith("transformers==")


def test_resolve_install_and_reuse_the_cached_venv(index, tmp_path):
    index.add("2.14.0.dev20261120+cpu", "aaaa1111")
    index.add("2.14.0.dev20261121+cpu", "bbbb2222")
    index.add("2.14.0.dev20261122+cpu", "cccc3333", tag="cp27-cp27m-win32")   # not for us
    s = nightly_settings(index, tmp_path)
    assert [w.date for w in list_wheels(s)] == ["2026-11-20", "2026-11-21", "2026-11-22"]
    assert resolve(s).date == "2026-11-21"
    n = provide(s, progress=False)
    assert (n.version, n.git, n.date) == ("2.14.0.dev20261121+cpu", "bbbb2222", "2026-11-21")
    out = subprocess.run([n.python, "-c", "import torch, harness; print(torch.version.git_version)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "bbbb2222"   # the venv's torch, and flagsweep importable for workers
    # The second call finds the ready venv and installs nothing: the wheel can even be gone.
    (index.root / "cpu" / "torch" / "torch-2.14.0.dev20261121+cpu-py3-none-any.whl").unlink()
    again = install(resolve(s, "2026-11-21"), s, progress=False)
    assert again == n
    older = provide(s, "2026-11-20", progress=False)
    assert older.git == "aaaa1111" and older.venv != n.venv


def test_transformers_pin_can_point_at_a_local_wheel(index, tmp_path):
    from tests.fakeindex import build_wheel

    index.add("2.14.0.dev20261121+cpu", "bbbb2222")
    tf = build_wheel(tmp_path / "tf", "9.9.9", "n/a", project="transformers")
    s = dataclasses.replace(nightly_settings(index, tmp_path), transformers_pin=str(tf))
    n = provide(s, progress=False)
    out = subprocess.run([n.python, "-c", "import transformers; print(transformers.__version__)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "9.9.9"


def test_install_failures_are_provider_errors(index, tmp_path):
    index.add("2.14.0.dev20261121+cpu", "bbbb2222", broken_import=True)
    s = nightly_settings(index, tmp_path)
    with pytest.raises(ProviderError, match="torch does not import"):
        provide(s, progress=False)
    corrupt = index.add("2.14.0.dev20261122+cpu", "cccc")
    corrupt.write_bytes(b"not a zip")
    with pytest.raises(ProviderError, match="pip could not install torch 2.14.0.dev20261122"):
        provide(s, "2026-11-22", progress=False)
    with pytest.raises(ProviderError, match="HTTP 404"):
        list_wheels(NightlySettings(index_url=index.url, channel="cu999"))


def test_current_reads_the_installed_torch():
    n = current(sys.executable)
    import torch

    assert n.current and n.version == torch.__version__ and n.git == torch.version.git_version
    assert n.date  # today, or the dev date


# ---- any build, named the way people name them ------------------------------------------------

def test_build_names_people_use():
    from bot.builds.provider import BuildSpec, SpecError, parse_spec

    assert parse_spec("current") == BuildSpec("current") and parse_spec("nightly") == BuildSpec("nightly")
    assert parse_spec("2026-11-21") == BuildSpec("date", "2026-11-21")
    assert parse_spec("2.14.1") == BuildSpec("version", "2.14.1")
    assert parse_spec("2.15.0.dev20261101") == BuildSpec("version", "2.15.0.dev20261101")
    assert parse_spec("2.15.0rc1") == BuildSpec("version", "2.15.0rc1")
    assert parse_spec("2.14.1+cpu") == BuildSpec("version", "2.14.1+cpu")
    assert parse_spec(sys.executable) == BuildSpec("python", sys.executable)
    for bad, words in (("2026-02-30", "not a real date"), ("/no/such/python", "no executable Python"),
                       ("latest", "expected current, nightly"), ("2.x", "expected current, nightly")):
        with pytest.raises(SpecError, match=words) as info:
            parse_spec(bad)
        assert repr(bad) in str(info.value) and "\n" not in str(info.value)


def test_versions_release_candidates_and_dev_builds_resolve(index, tmp_path):
    # Versions stay at or below 2.14.1: this machine's pip config caps torch there (/etc/xdg/pip).
    from bot.builds.provider import BuildSpec, provide_spec
    from bot.builds.wheel_index import available_builds, pick_version

    index.add("2.13.0+cpu", "rel13")
    index.add("2.14.0rc1+cpu", "rc14")
    index.add("2.14.0.dev20261101+cpu", "dev1101")
    index.add("2.14.0.dev20261102+cpu", "dev1102")
    index.add("2.12.0+cpu", "old12", tag="cp27-cp27m-win32")          # not installable here
    s = nightly_settings(index, tmp_path)
    wheels = list_wheels(s)
    assert available_builds(wheels) == ["2.13.0+cpu", "2.14.0.dev20261101+cpu", "2.14.0.dev20261102+cpu", "2.14.0rc1+cpu"]
    assert pick_version(wheels, "2.13.0").version == "2.13.0+cpu"     # a local build matches the public version
    assert pick_version(wheels, "2.14.0rc1").version == "2.14.0rc1+cpu"
    with pytest.raises(ProviderError, match=r"no torch 2\.12\.0 on the index.*2\.13\.0\+cpu \.\. 2\.14\.0rc1\+cpu"):
        pick_version(wheels, "2.12.0")
    rel = provide_spec(s, BuildSpec("version", "2.13.0"), progress=False)
    assert (rel.version, rel.git, rel.index, rel.channel) == ("2.13.0+cpu", "rel13", index.url, "cpu")
    assert rel.date and rel.origin() == BuildOrigin(index=index.url, channel="cpu")
    rc = provide_spec(s, BuildSpec("version", "2.14.0rc1"), progress=False)
    assert rc.git == "rc14"
    newest = provide_spec(s, BuildSpec("nightly"), progress=False)    # the newest dev build, not the rc
    assert (newest.version, newest.date) == ("2.14.0.dev20261102+cpu", "2026-11-02")
    dated = provide_spec(s, BuildSpec("date", "2026-11-01"), progress=False)
    assert dated.git == "dev1101"
    by_dev_version = provide_spec(s, BuildSpec("version", "2.14.0.dev20261101"), progress=False)
    assert by_dev_version == dated                                    # the same cached venv


def test_a_pypi_style_index_without_channels(index, tmp_path):
    from bot.builds.provider import BuildSpec, provide_spec

    index.add("2.13.0", "pypi13", channel="")
    s = nightly_settings(index, tmp_path, channel="")
    n = provide_spec(s, BuildSpec("version", "2.13.0"), progress=False)
    assert (n.version, n.git, n.channel) == ("2.13.0", "pypi13", "")


def test_an_interpreter_path_is_used_as_it_is(tmp_path):
    from bot.builds.provider import BuildSpec, SpecError, provide_spec

    n = provide_spec(NightlySettings(), BuildSpec("python", sys.executable), progress=False)
    import torch

    assert (n.version, n.git, n.python, n.venv) == (torch.__version__, torch.version.git_version, sys.executable, None)
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    with pytest.raises(SpecError, match=r"torch does not import in .*bare/bin/python: ModuleNotFoundError"):
        provide_spec(NightlySettings(), BuildSpec("python", str(bare / "bin" / "python")), progress=False)


def test_a_half_installed_venv_is_rebuilt(index, tmp_path):
    index.add("2.14.1+cpu", "rel14")
    s = nightly_settings(index, tmp_path)
    half = tmp_path / "venvs" / "torch-2.14.1+cpu"
    (half / "bin").mkdir(parents=True)
    (half / "leftover-from-a-killed-pip").write_text("x")          # no ready marker: an interrupted install
    from bot.builds.wheel_index import pick_version

    n = install(pick_version(list_wheels(s), "2.14.1"), s, progress=False)
    assert n.git == "rel14" and not (half / "leftover-from-a-killed-pip").exists() and (half / ".flagsweep-ready").exists()


def _real_provider_pipeline(index: FakeIndex, tmp_path):
    """A store, settings over `index`, and the fake world's steps with the real provider: (settings, conn, world, steps)."""
    from bot.pipeline import steps as steps_mod
    from bot.settings import Settings
    from state import db
    from tests.fakesweep import World

    nightly = dataclasses.replace(nightly_settings(index, tmp_path), configs=["capture_scalar_outputs"])
    settings = Settings(state_path=tmp_path / "state.sqlite", nightly=nightly)
    world = World()
    steps = world.steps()
    steps.provide = steps_mod.provide                     # the real provider, fake wheels over HTTP
    return settings, db.connect(settings.state_path), world, steps


def test_an_index_that_is_down_or_lacks_the_build_fails_the_night_with_its_reason(tmp_path):
    """Stored as a failed run with the reason; nothing swept, nothing published."""
    from bot.pipeline import nightly
    from state import runs

    idx = FakeIndex(tmp_path / "index")
    idx.add("2.14.1+cpu", "rel14")
    settings, conn, world, steps = _real_provider_pipeline(idx, tmp_path)
    missing = nightly.run_nightly(conn, settings, torch="2.16.0", out_dir=tmp_path, steps=steps)
    assert missing.status == "failed" and "no torch 2.16.0 on the index" in missing.reason
    url = idx.down()
    down = nightly.run_nightly(conn, settings, torch="2.14.1", out_dir=tmp_path, steps=steps)
    assert down.status == "failed" and f"cannot read the nightly index {url}" in down.reason
    stored = [runs.get_run(conn, r.run_id) for r in (missing, down)]
    assert [r.status for r in stored] == ["failed", "failed"] and "no torch 2.16.0" in stored[0].reason
    assert stored[1].environment.torch_index == url and stored[1].environment.torch_channel == "cpu"
    assert world.sweeps == [] and world.published == []
    conn.close()


def test_nightly_cli_refuses_a_build_name_it_does_not_know(tmp_path, capsys):
    from bot.cli.main import main

    code = main(["--state", str(tmp_path / "s.sqlite"), "nightly", "--dry-run", "--torch", "newest"])
    err = capsys.readouterr().err
    assert code == 2 and "--torch 'newest': expected current, nightly" in err and "Traceback" not in err


def test_the_run_environment_keeps_version_commit_channel_and_index(index, tmp_path):
    from bot.pipeline import nightly
    from state import runs

    index.add("2.13.0+cpu", "rel13")
    settings, conn, world, steps = _real_provider_pipeline(index, tmp_path)
    world.version = "2.13.0+cpu"
    result = nightly.run_nightly(conn, settings, torch="2.13.0", out_dir=tmp_path, steps=steps)
    env = runs.get_run(conn, result.run_id).environment
    assert result.status == "swept" and result.torch["git"] == "rel13"
    assert (env.torch_version, env.torch_index, env.torch_channel) == ("2.13.0+cpu", index.url, "cpu")
    assert env.python == result.torch["python"] and "torch-2.13.0+cpu" in env.python
    conn.close()
