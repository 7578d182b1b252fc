"""Run history subcommands: `diff`, `report`, `export`, `runs list`, `runs show`.

Thin shells: they open the store, call state.history / harness.core.diff / bot.report.report,
and print through templates (or JSON with --json, and then nothing else on stdout).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bot.cli import arguments as types, say
from bot.text.render import render


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands."""
    p = sub.add_parser("diff", help="what changed between two runs",
                       description="Compare two runs item by item. No run: the two latest comparable runs; "
                                   "one run: that run against its previous comparable run.")
    p.add_argument("run_a", nargs="?", type=int, metavar="RUN_A", help="the earlier run (or the only run given)")
    p.add_argument("run_b", nargs="?", type=int, metavar="RUN_B", help="the later run")
    p.add_argument("--all", action="store_true", help="list unchanged items too")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("report", help="an HTML (or Markdown) report of one run",
                       description="One self-contained report: effects per config, the models x configs matrix, "
                                   "transitions since the previous comparable run, crash signatures, trend.")
    p.add_argument("run", nargs="?", type=int, metavar="RUN", help="run id (default: the latest finished run)")
    p.add_argument("-o", "--output", metavar="FILE", type=types.nonempty("the output file"), help="where to write it (default: report.html / report.md)")
    p.add_argument("--format", choices=["html", "md"], default=None, help="default: from the -o suffix, else html")
    p.add_argument("--trend", type=types.positive_int, default=14, metavar="N", help="runs in the trend chart (default 14)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("export", help="a run's outcomes as CSV or JSON lines")
    p.add_argument("run", type=int, metavar="RUN")
    p.add_argument("--format", choices=["csv", "jsonl"], default="jsonl")
    p.add_argument("-o", "--output", metavar="FILE", type=types.nonempty("the output file"), help="default: stdout")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("runs", help="stored runs")
    runs_sub = p.add_subparsers(dest="runs_command", metavar="ACTION")
    q = runs_sub.add_parser("list", help="latest runs first")
    q.add_argument("--limit", type=types.positive_int, default=20)
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_runs_list)
    q = runs_sub.add_parser("show", help="one run: environment, configs, effects")
    q.add_argument("run", type=int, metavar="RUN")
    q.add_argument("--model", type=types.nonempty("--model"), metavar="MODEL",
                   help="one model of the run: the config keys its baseline read in each call window")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_runs_show)
    p.set_defaults(func=lambda args, settings: _usage(p))


def _usage(parser: argparse.ArgumentParser) -> int:
    say.err(parser.format_help(), end="")
    return 2


def _open(settings: Any):
    """Open the existing store, never creating one (a StoreError is reported by bot.cli.main.main)."""
    from bot.cli.store import open_existing

    return open_existing(settings)


def _fail(message: str, code: int = 1) -> int:
    say.err(f"flagsweep: {message}")
    return code


BAD_REQUEST = 2      # a run id that names no run: nothing to do, as `merge 99`


def _no_run(conn: Any, *run_ids: int | None) -> str | None:
    """'no run N' for the first run id given that the store does not hold, else None."""
    from state import runs

    missing = [rid for rid in run_ids if rid is not None and runs.get_run(conn, rid) is None]
    return f"no run {missing[0]}" if missing else None


def cmd_diff(args: argparse.Namespace, settings: Any) -> int:
    """flagsweep diff [RUN_A] [RUN_B] [--json]."""
    from bot.report import report
    from state import history

    conn = _open(settings)
    missing = _no_run(conn, args.run_a, args.run_b)
    if missing:
        return _fail(missing, BAD_REQUEST)
    if args.run_a is not None and args.run_b is not None:
        pair = (args.run_a, args.run_b)
    elif args.run_a is not None:
        prev = history.previous_comparable_run(conn, args.run_a)
        if prev is None:
            return _fail(f"run {args.run_a} has no earlier comparable run (same configs, overlapping models); "
                         "name both runs to compare anyway")
        pair = (prev, args.run_a)
    else:
        pair = history.latest_comparable_pair(conn)
        if pair is None:
            return _fail(f"no two comparable finished runs in {settings.state_path}")
    try:
        data = report.diff_runs(conn, *pair)
    except LookupError as exc:
        return _fail(str(exc))
    if args.json:
        say.json(data, indent=2)
    else:
        say.out(render("report_diff.txt.j2", d=data, show_all=args.all), end="")
    return 0


def cmd_report(args: argparse.Namespace, settings: Any) -> int:
    """flagsweep report [RUN] -o FILE [--format html|md]."""
    from bot.report import report

    conn = _open(settings)
    fmt = args.format or ("md" if args.output and args.output.endswith(".md") else "html")
    out = Path(args.output or f"report.{fmt}")
    missing = _no_run(conn, args.run)
    if missing:
        return _fail(missing, BAD_REQUEST)
    try:
        ctx = report.build_context(conn, args.run, trend_runs=args.trend)
    except LookupError as exc:
        return _fail(str(exc))
    text = report.render_html(ctx) if fmt == "html" else report.render_md(ctx)
    out.write_text(text, encoding="utf-8")
    say.err(f"flagsweep: wrote {out} (run {ctx['run']['id']}, {len(ctx['models'])} models, "
            f"{len(ctx['configs'])} configs)")
    return 0


def cmd_export(args: argparse.Namespace, settings: Any) -> int:
    """flagsweep export RUN --format csv|jsonl."""
    from bot.report import report

    conn = _open(settings)
    rows = report.export_rows(conn, args.run)
    if rows is None:
        return _fail(f"no run {args.run}", BAD_REQUEST)
    text = report.to_csv(rows) if args.format == "csv" else report.to_jsonl(rows)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        say.data(text)
    return 0


def cmd_runs_list(args: argparse.Namespace, settings: Any) -> int:
    """flagsweep runs list [--json]."""
    from bot.report import report

    conn = _open(settings)
    rows = report.runs_summary(conn, limit=args.limit)
    if args.json:
        say.json(rows, indent=2)
    else:
        say.out(render("report_runs_list.txt.j2", runs=rows, state=str(settings.state_path)), end="")
    return 0


def _show_model(conn: Any, args: argparse.Namespace, run: dict) -> int:
    """runs show RUN --model M: the keys M's baseline read per call window (DESIGN "Words": call window)."""
    from state import flags, runs

    if args.model not in runs.get_run(conn, args.run).models:
        return _fail(f"run {args.run} has no model {args.model}", BAD_REQUEST)
    windows = flags.windows(conn, args.run, args.model)
    if args.json:
        say.json({"run": args.run, "model": args.model, "windows": windows}, indent=2)
    else:
        say.out(render("report_run_model.txt.j2", run=args.run, model=args.model, windows=windows), end="")
    return 0


def cmd_runs_show(args: argparse.Namespace, settings: Any) -> int:
    """flagsweep runs show RUN [--json]."""
    from bot.report import report

    conn = _open(settings)
    data = report.run_detail(conn, args.run)
    if data is None:
        return _fail(f"no run {args.run}", BAD_REQUEST)
    if args.model is not None:
        return _show_model(conn, args, data)
    if args.json:
        say.json(data, indent=2)
    else:
        say.out(render("report_run_show.txt.j2", r=data), end="")
    return 0
