"""The report (HTML parsed back, Markdown), the diff/runs/export CLI, and a headless-browser screenshot."""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bot.report import report
from state.db import connect
from tests import historydata as hd
from harness.core.run_environment import RunEnvironment

CSO = "capture_scalar_outputs"


class Collect(HTMLParser):
    """Every start tag with its attributes and the text directly inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict, list[str]]] = []
        self.stack: list[int] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs), []))
        if tag not in ("meta", "br", "line", "circle", "polyline", "input"):
            self.stack.append(len(self.tags) - 1)

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack:
            self.tags[self.stack[-1]][2].append(data)

    def find(self, tag=None, **attrs):
        return [(t, a, "".join(txt).strip()) for t, a, txt in self.tags
                if (tag is None or t == tag) and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "state.sqlite"
    conn = connect(path)
    hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")
    hd.store_run(conn, hd.night(graphs_a=2), kind="nightly", nightly="2026-11-02")
    night3 = hd.night(graphs_a=2, b_crashes=True, c_crashes=False)
    night3.append(hd.Outcome(model="BrokenModel", config="baseline", status="create_error", stratum="vision_other",
                             error_type="ValueError", error_message="bad config", signature="ValueError: bad config"))
    night3.append(hd.Outcome(model="BrokenModel", config=CSO, status="create_error", stratum="vision_other"))
    hd.store_run(conn, night3, kind="nightly", nightly="2026-11-03")
    return path, conn


def _cli(state: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", "--state", str(state), *args], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def test_html_report_key_numbers(store, tmp_path):
    path, conn = store
    out = tmp_path / "report.html"
    res = _cli(path, "report", "-o", str(out))
    assert res.returncode == 0, res.stderr
    html = out.read_text()
    page = Collect()
    page.feed(html)
    counts = {a["data-effect"]: int(txt) for _, a, txt in page.find("td", data_config=CSO) if "count" in a["class"]}
    assert counts == {"reduces_graphs": 2, "no_effect": 0, "increases_graphs": 0, "crashes": 1, "fixes_crash": 0,
                      "both_crash": 0, "create_error": 1}
    assert page.find("th", data_config=CSO)[0][2] == "3 / 4"   # testable / total
    assert page.find("span", id="model-count")[0][1]["data-value"] == "4"
    # Transitions since run 2: Bert new crash, Qwen fixed, BrokenModel new.
    rows = {a["data-model"] + "/" + a["data-config"]: a["data-transition"] for _, a, _ in page.find("tr")
            if "data-transition" in a}
    assert rows == {f"BertModel/{CSO}": "new_crash", f"Qwen2VLForConditionalGeneration/{CSO}": "fixed",
                    "BrokenModel/baseline": "new_model", f"BrokenModel/{CSO}": "new_model"}
    assert {a["data-transition"]: txt for _, a, txt in page.find("span") if "tcount" in a.get("class", "")} == {
        "new_crash": "1", "fixed": "1", "new_model": "2", "unchanged": "4"}
    # Matrix: coloured by effect, the signature on hover.
    bert = [a for _, a, _ in page.find("td", data_config=CSO) if "cell" in a.get("class", "")]
    assert [a["data-effect"] for a in bert] == ["crashes", "create_error", "reduces_graphs", "reduces_graphs"]
    assert "e-crashes" in bert[0]["class"] and hd.PENDING in bert[0]["title"]
    # Crash signatures with their models; the trend has one line per tracked effect over three runs.
    sigs = page.find("tr", data_config=CSO)
    sig_rows = [a for _, a, _ in sigs if a.get("class") == "signature"]
    assert len(sig_rows) == 1 and sig_rows[0]["data-count"] == "1"
    series = {a["data-series"]: a["points"].split() for _, a, _ in page.find("polyline")}
    assert set(series) == {"crashes", "reduces_graphs", "no_effect"} and all(len(p) == 3 for p in series.values())
    # Self-contained and safe: no external URL, foreign text escaped.
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert "<class 'torch.SymInt'>" not in html and "&lt;class" in html


def test_trend_points_follow_the_counts(store):
    _, conn = store
    ctx = report.build_context(conn, None, trend_runs=14)
    tr = ctx["trend"][0]
    assert tr["series"] == {"crashes": [1, 1, 1], "reduces_graphs": [0, 1, 2], "no_effect": [2, 1, 0]}
    chart = tr["chart"]
    ys = {line["name"]: [p["y"] for p in line["points"]] for line in chart["lines"]}
    assert ys["reduces_graphs"][0] == chart["bottom"] and ys["reduces_graphs"][2] == chart["pad"]  # 0 and the top
    assert ys["crashes"][0] == ys["crashes"][2]


def test_markdown_report_has_the_same_sections(store, tmp_path):
    path, _ = store
    out = tmp_path / "report.md"
    res = _cli(path, "report", "3", "--format", "md", "-o", str(out))
    assert res.returncode == 0, res.stderr
    md = out.read_text()
    for heading in ("## Changes since the previous comparable run", "## Effects per config", "## Models × configs",
                    "## Crash signatures", "## Trend over the last runs"):
        assert heading in md
    assert "| crashes | 1 | 33.3% |" in md
    assert "| `BertModel` | capture\\_scalar\\_outputs | new crash |" in md   # one escaper: `_` escaped, renders as `_`
    assert "@someone" not in md   # no mention leaks from foreign text (the example message is not in md)


def test_diff_cli_json_and_text(store):
    path, _ = store
    res = _cli(path, "diff", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert (data["from"], data["to"]) == (2, 3)
    t = {(x["model"], x["config"]): x for x in data["transitions"]}
    bert = t[("BertModel", CSO)]
    assert bert["transition"] == "new_crash"
    assert set(bert["before"]) >= {"effect", "graphs", "signature"}
    assert bert["before"]["effect"] == "no_effect" and bert["after"]["effect"] == "crashes"
    assert bert["after"]["signature"] == hd.PENDING
    assert data["changed_models"] == ["BertModel", "BrokenModel", "Qwen2VLForConditionalGeneration"]
    text = _cli(path, "diff", "1", "3")
    assert text.returncode == 0 and "Run 1 -> run 3" in text.stdout
    assert "graphs_decreased   LlamaForCausalLM [capture_scalar_outputs]: 4 -> 2 graphs" in text.stdout
    assert "1 new crashes, 1 fixed" in text.stdout


def test_diff_of_incomparable_runs_says_what_can_be_compared(tmp_path):
    path = tmp_path / "s.sqlite"
    conn = connect(path)
    a = hd.store_run(conn, hd.night())
    more = dict(hd.CONFIGS, capture_dynamic_output_shape_ops={"torch._dynamo.config.x": True})
    b = hd.store_run(conn, hd.night(b_crashes=True) + [hd.ok("BertModel", "capture_dynamic_output_shape_ops", 2)],
                     configs=more)
    res = _cli(path, "diff")
    assert res.returncode == 1 and "no two comparable" in res.stderr
    res = _cli(path, "diff", str(a), str(b))
    assert res.returncode == 0, res.stderr
    assert "Not everything can be compared" in res.stdout
    assert "config capture_dynamic_output_shape_ops is only in the later run" in res.stdout
    assert "1 new crashes" in res.stdout
    data = json.loads(_cli(path, "diff", str(a), str(b), "--json").stdout)
    assert data["comparable"] is False
    assert data["not_compared"]["configs_only_to"] == ["capture_dynamic_output_shape_ops"]
    assert {x["config"] for x in data["transitions"]} == {"baseline", CSO}


def test_runs_list_show_and_export(store, tmp_path):
    path, _ = store
    listed = json.loads(_cli(path, "runs", "list", "--json").stdout)
    assert [r["id"] for r in listed] == [3, 2, 1] and listed[0]["n_items"] == 8 and listed[0]["models"] == 4
    shown = json.loads(_cli(path, "runs", "show", "3", "--json").stdout)
    assert shown["previous_comparable"] == 2 and shown["effects"][CSO]["crashes"] == 1
    assert shown["environment"]["torch_version"] == hd.ENV["torch_version"]
    text = _cli(path, "runs", "show", "3").stdout
    assert "previous comparable run: 2" in text and "capture_scalar_outputs: 1 crashes" in text
    assert _cli(path, "runs", "show", "42").returncode == 2     # a run the store lacks: a bad request (issue 31)
    rows = list(csv.DictReader(io.StringIO(_cli(path, "export", "3", "--format", "csv").stdout)))
    assert len(rows) == 8 and rows[0]["run_id"] == "3"
    assert {r["model"] for r in rows if r["status"] == "error"} == {"BertModel"}
    lines = _cli(path, "export", "3", "--format", "jsonl").stdout.splitlines()
    assert len(lines) == 8 and json.loads(lines[1])["config"] == CSO and json.loads(lines[1])["status"] == "error"


# --- headless browser ---------------------------------------------------------------------------

def _browser() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _png_pixels(data: bytes):
    """Decode an 8-bit RGB/RGBA PNG into a numpy array (enough for a browser screenshot)."""
    import numpy as np

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * bpp)
    out = np.zeros((height, width * bpp), dtype=np.int32)
    prev = np.zeros(width * bpp, dtype=np.int32)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 0xFF
        else:  # Sub, Average, Paeth depend on the left pixel: decode byte by byte
            cur = np.zeros_like(line)
            for i in range(len(line)):
                a = cur[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[i] = (line[i] + pred) & 0xFF
        out[y], prev = cur, cur
    return out.reshape(height, width, bpp)[:, :, :3]


def _boxes(pixels, rgb: tuple[int, int, int], n: int) -> list[tuple[int, int, int, int]]:
    """The `n` largest connected areas painted `rgb` (±2 per channel), as (top, bottom, left, right), top first."""
    import numpy as np
    from scipy import ndimage

    mask = np.abs(pixels - rgb).sum(axis=2) <= 6
    labels, count = ndimage.label(mask)
    sizes = ndimage.sum(mask, labels, range(1, count + 1))
    boxes = []
    for i in np.argsort(sizes)[::-1][:n]:
        rows, cols = ndimage.find_objects(labels)[i]
        boxes.append((rows.start, rows.stop, cols.start, cols.stop))
    return sorted(boxes)


def _dark(region) -> int:
    """Pixels dark enough to be text (every channel under 110)."""
    return int((region.max(axis=2) < 110).sum())


@pytest.mark.skipif(_browser() is None, reason="no chromium on PATH (apt-get install chromium to run it; "
                                                ".ci/install-chromium does in CI)")
def test_report_screenshot_in_headless_browser(store, tmp_path):
    """What a person sees: the matrix's cells painted in one column, each with its text, beside the model names."""
    path, conn = store
    html = tmp_path / "report.html"
    html.write_text(report.render_html(report.build_context(conn, 3)))
    png = tmp_path / "report.png"
    res = subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          "--window-size=1000,2200", f"--screenshot={png}", html.as_uri()],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert png.exists(), res.stderr[-2000:]
    pixels = _png_pixels(png.read_bytes())
    assert pixels.shape[:2] == (2200, 1000)

    # The matrix: BertModel's crash cell (#f08a8a) above the two reduces_graphs cells (#8fd19e), all one
    # column, each a real table cell (not a legend chip or a swatch), inside the window.
    (crash,) = _boxes(pixels, (0xF0, 0x8A, 0x8A), 1)
    reduces = _boxes(pixels, (0x8F, 0xD1, 0x9E), 2)
    for top, bottom, left, right in [crash, *reduces]:
        assert bottom - top >= 15 and right - left >= 120 and right < 1000
        assert abs(left - crash[2]) <= 2 and abs(right - crash[3]) <= 2
        cell = pixels[top:bottom, left:right]
        assert _dark(cell) > 20, "a matrix cell is painted but shows no text"
        # The row is not blank to the left of the cell: the model name, stratum and baseline graphs.
        assert _dark(pixels[top:bottom, 10:left]) > 150
    assert crash[1] <= reduces[0][0] and reduces[0][1] <= reduces[1][0]
    # The page above the matrix carries the title, the summary and the tables: lots of text, not a blank page.
    assert _dark(pixels[:crash[0]]) > 20_000
    # The trend chart's crash line (#d7263d) is drawn below the matrix.
    trend = pixels[crash[1]:]
    assert int((abs(trend - (0xD7, 0x26, 0x3D)).sum(axis=2) <= 6).sum()) > 100

    # The text a reader gets from the rendered page (the DOM after layout and any script).
    dom = subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", html.as_uri()],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path).stdout
    page = Collect()
    page.feed(dom)
    headings = [text for tag, _, text in page.find("h2")]
    assert "Models × configs" in headings and "Crash signatures" in headings
    rows = [text for _, _, text in page.find("td", **{"class": "model"})]
    assert rows[0] == "BertModel" and "Qwen2VLForConditionalGeneration" in rows   # the crash cell's row is on top


def test_markdown_cells_cannot_break_tables_or_mention_anyone(tmp_path):
    """The Markdown report escapes cells with the one escaper (bot.text.markdown.cell): pipes, mentions, #refs, comments."""
    conn = connect(tmp_path / "state.sqlite")
    nasty = "RuntimeError: Eq(u0, 0) | x @pytorch/team #123 <!-- hidden -->"
    hd.store_run(conn, hd.night(b_crashes=False, c_crashes=False)[:2] + [hd.crash("BertModel", "baseline", sig=nasty)])
    md = report.render_md(report.build_context(conn, 1))
    row = next(line for line in md.splitlines() if "Eq(u0, 0)" in line and line.startswith("|"))
    assert "\\| x" in row and "@\u200dpytorch/team" in row and "#\u200d123" in row
    assert "<!--" not in row and "@pytorch" not in md


def test_report_of_a_failed_run_with_a_sparse_environment(tmp_path):
    """A nightly whose install failed has no torch/transformers keys: the report still renders and says so."""
    from state import runs as runs_mod

    conn = connect(tmp_path / "state.sqlite")
    run_id = runs_mod.create_run(conn, environment=RunEnvironment.from_dict({"python_version": "3.11.7"}), models=[], configs={"baseline": {}},
                                 kind="nightly", nightly="2026-11-04")
    runs_mod.finish_run(conn, run_id, "failed", reason="no wheel for cp311")
    context = report.build_context(conn, run_id)
    html = report.render_html(context)
    assert "torch ?" in html and "transformers ?" in html
    assert "torch ?" in report.render_md(context)
