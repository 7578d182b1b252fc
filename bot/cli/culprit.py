"""`flagsweep culprit`: from a regression range to the commit, for a person.

Two ways in: a stored signature (`--config C --signature S`: its newest regression range, its verified reproducer
and stored crash, exactly what the nightly's culprit step takes; with `--fix`, its fix range), or a reproducer and
two builds (`--repro FILE --good SHA --bad SHA --signature S`, or `--old`/`--new`: the builds named by their git
commits, a nightly's or main's; `--python` is the older build's interpreter, `--bad-python` the newer's; `--fix`
searches for the first commit where the signature is gone). Both build the search with the nightly's own
`prepare` (bot.pipeline.culprit). `--modes NAME` (one; eval by default) picks the range a run of that mode stored, as
the `bisect` comment searches its issue's mode's. The commits come from `--checkout` (else `[culprit] checkout`); a
bisection needs a checkout. Bad values are refused before anything runs (exit 2, one line); `--json` prints the commit
range.
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

from bot.cli import arguments as types, say
from bot.settings import Settings
from harness.core.modes import Mode

_SHA = re.compile(r"^[0-9a-f]{7,40}$")


def _sha(text: str) -> str:
    if not _SHA.match(text):
        raise argparse.ArgumentTypeError(f"expected a git commit (7 to 40 hex digits), got {text!r}")
    return text


def _file(text: str) -> str:
    if not text.strip() or not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    return text


def _folder(text: str) -> str:
    if not text.strip() or not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder (a git checkout of pytorch)")
    return text


def register(sub: argparse._SubParsersAction) -> None:
    """Add `culprit`."""
    p = sub.add_parser("culprit", help="the commit behind a regression: suspects ranked, Python-only ranges bisected",
                       description="Take a regression range to its commits: rank them against the crash and, with a "
                                   "checkout, bisect the Python-only stretch on an overlay of the good build (each "
                                   "probe [culprit] runs times). On a stored signature (--config, --signature), or "
                                   "on a reproducer and two builds (--repro, --good, --bad, --signature).")
    p.add_argument("--config", type=types.nonempty("the config"), help="the stored crash's config")
    p.add_argument("--signature", type=types.nonempty("the signature"), help="the crash's signature")
    p.add_argument("--repro", type=_file, metavar="FILE", help="a reproducer that prints FLAGSWEEP_RESULT lines")
    p.add_argument("--good", "--old", dest="good", type=_sha, metavar="SHA",
                   help="the older build's git commit (nightly or main)")
    p.add_argument("--bad", "--new", dest="bad", type=_sha, metavar="SHA",
                   help="the newer build's git commit (nightly or main)")
    p.add_argument("--python", type=types.interpreter, help="the good build's interpreter (default: this one)")
    p.add_argument("--bad-python", type=types.interpreter, metavar="PY",
                   help="the bad build's interpreter (default: --python's)")
    p.add_argument("--fix", action="store_true", help="search for the commit that fixed the signature: --good (or "
                                                      "--old) is the last failing build, --bad (or --new) the first "
                                                      "passing one")
    p.add_argument("--modes", "--mode", dest="mode", metavar="NAME", type=types.name_list,
                   help="the mode whose stored range is searched (with --config; one): eval, train, bf16, fp16, "
                        "train-bf16, dynamic-true, dynamic-marked, sdpa, eager-attention or a [modes.NAME] table "
                        "(default: eval)")
    p.add_argument("--checkout", type=_folder, metavar="DIR", help="a git checkout of pytorch (default: [culprit] "
                                                                   "checkout)")
    p.add_argument("--json", action="store_true", help="print the commit range as JSON (and nothing else on stdout)")
    p.set_defaults(func=run_culprit)


def _refuse(message: str) -> int:
    say.err(f"flagsweep culprit: {message}")
    return 2


def run_culprit(args: argparse.Namespace, settings: Settings) -> int:
    """Handler of `flagsweep culprit`."""
    if args.checkout:
        settings = dataclasses.replace(settings, culprit=dataclasses.replace(settings.culprit, checkout=args.checkout))
    if not args.signature:
        return _refuse("--signature is required")
    if args.repro and not (args.good and args.bad):
        return _refuse("--repro needs --good and --bad (the two builds' git commits)")
    if not args.repro and (args.good or args.bad or not args.config):
        return _refuse("give --config with --signature (a stored crash), or --repro, --good and --bad")
    if args.repro and args.mode:
        return _refuse("--modes picks a stored signature's range (--config); a --repro script runs in its own mode")
    mode = types.one_mode(args.mode, settings, "a stored range is one mode's")
    if isinstance(mode, str):
        return _refuse(mode)
    if not settings.culprit.checkout:
        return _refuse("no checkout: pass --checkout DIR or set [culprit] checkout (a git checkout of pytorch)")
    found = _on_repro(args, settings) if args.repro else _on_stored(args, settings, mode)
    if isinstance(found, int):
        return found
    if args.json:
        say.json(found.to_dict(), indent=2, sort_keys=True, default=list)
    else:
        from bot.text.render import render
        say.out(render("culprit.txt.j2", r=found.to_dict(), culprit=found.culprit, ranked=_ranked(found)), end="")
    return 0 if found.status in ("found", "suspects", "cut", "outside", "one_of") else 1


def _ranked(found) -> list[dict]:
    from bot.issues.culprit import SHOWN_SUSPECTS
    return [{"sha": s.sha[:12], "score": s.score, "why": s.why,
             "title": (found.commit(s.sha).title if found.commit(s.sha) else "")}
            for s in found.suspects[:SHOWN_SUSPECTS]]


def _on_stored(args: argparse.Namespace, settings: Settings, mode: Mode):
    """The nightly's culprit step on the newest regression range of (config, signature) stored by a run of `mode`
    (another mode's crash is another issue, with its own range and reproducer)."""
    from bot.cli.store import open_existing
    from bot.pipeline import culprit as step
    from bot.pipeline import steps
    from state import ranges
    from state import runs as runs_mod

    conn = open_existing(settings)
    try:
        kind = "fixed" if args.fix else "new_crash"          # --fix: the stored fix range (last failing, first passing)
        held = [r for run in ranges.runs_with(conn, args.config, args.signature)
                if runs_mod.get_run(conn, run).options.sweep.mode.key == mode.key
                for r in ranges.for_run(conn, [run]) if r.key == (args.config, args.signature, kind)]
        if not held or not (held[0].good.git and held[0].bad.git):
            where = "" if mode.is_default else f" in mode {mode.name}"
            return _refuse(f"no stored {'fix' if args.fix else 'regression'} range with both builds' commits for "
                           f"{args.config} / {args.signature[:80]!r}{where}")
        good = (lambda s, r: args.python) if args.python else \
            (lambda s, r: steps.provide(s, "nightly", r.good.date, True).python)
        run = runs_mod.get_run(conn, held[0].run_id)
        return step.for_range(conn, run, held[0], settings, step.source_for(settings), good, progress=True)
    finally:
        conn.close()


def _on_repro(args: argparse.Namespace, settings: Settings):
    """A reproducer and two builds: their main commits, then the search (not stored: no store is needed)."""
    from bot.builds.checkout import CheckoutError
    from bot.pipeline import culprit as step
    from bot.ranges import culprit as search
    from harness.core.commits import CommitError

    source = step.Checkout(Path(settings.culprit.checkout))
    python, script = args.python or sys.executable, Path(args.repro).read_text()
    try:
        good, bad = step.main_or_self(source, args.good), step.main_or_self(source, args.bad)
        steps = step.prepare(source, settings, script, python, args.bad_python or python, args.signature)
    except (CheckoutError, CommitError, RuntimeError) as exc:
        return _refuse(str(exc))
    job = search.Search(args.signature, good, bad, fix=args.fix)      # ranked against its own traceback

    return search.find(steps, job, settings.culprit, progress=True)
