"""`flagsweep zoo list`, `flagsweep zoo check` and `flagsweep repro`: the model zoo's commands."""
from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bot.cli import arguments as types, say
from bot.text.render import render
from harness.core.calls import SCENARIOS

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands."""
    zoo = sub.add_parser("zoo", help="the model zoo: list candidates, check that they build and run")
    zsub = zoo.add_subparsers(dest="zoo_command", metavar="ZOO_COMMAND")
    lst = zsub.add_parser("list", help="every candidate model class with its stratum and kind")
    lst.add_argument("--json", action="store_true", help='print [{"model","stratum","kind"}] only')
    lst.set_defaults(func=cmd_list)
    chk = zsub.add_parser("check", help="build + one eager forward per model, in isolated workers")
    chk.add_argument("--models", action="extend", type=types.model_patterns, default=[], metavar="A,B,'Qwen*'",
                     help="names or globs (repeatable; default: every candidate)")
    chk.add_argument("--sample", type=types.positive_int, metavar="N", help="a stratified random sample of N")
    chk.add_argument("--seed", type=int, default=0, help="seed of the sample")
    chk.add_argument("--workers", type=types.count_or_auto, metavar="N", help="worker processes (default: settings.sweep.workers)")
    chk.add_argument("--timeout", type=types.positive_float, metavar="S", help="seconds per model (default: settings.zoo.check_timeout)")
    chk.add_argument("--no-cache", action="store_true", help="rerun every model, ignoring the results kept in the store")
    chk.add_argument("--json", action="store_true", help="print one JSON document only")
    chk.set_defaults(func=cmd_check)
    lk = zsub.add_parser("lock", help="discover every candidate and write the locked corpus (the only writer of the lock)")
    lk.add_argument("--models", action="extend", type=types.model_patterns, default=[], metavar="A,B,'Qwen*'",
                    help="re-lock only these (repeatable; default: every candidate)")
    lk.add_argument("--sample", type=types.positive_int, metavar="N", help="re-lock a stratified random sample of N")
    lk.add_argument("--seed", type=int, default=0, help="seed of the sample")
    lk.add_argument("--workers", type=types.count_or_auto, metavar="N", help="worker processes (default: settings.sweep.workers)")
    lk.add_argument("--timeout", type=types.positive_float, default=600.0, metavar="S", help="seconds per class (default: 600)")
    lk.add_argument("--fresh", action="store_true", help="redo the entries an interrupted lock kept in the store")
    lk.add_argument("--lock-dir", metavar="DIR", type=types.nonempty("the lock folder"), help="where lock files live (default: the package's harness/zoo/lock)")
    lk.add_argument("--check", action="store_true", help="compare the lock with the installed transformers; exit 1 if stale")
    lk.add_argument("--reverify", action="store_true", help="verify the package lock's good entries again (build, eager, "
                    "the second input spec sealed again) without discovering them again")
    lk.add_argument("--modes-probe", action="store_true", help="probe again which modes the package lock's good entries "
                    "run in eager (attention eager/sdpa, bfloat16/float16 autocast, train; one step each) and change "
                    "nothing else in them")
    lk.add_argument("--json", action="store_true", help="print one JSON document only")
    lk.set_defaults(func=cmd_lock)
    df = zsub.add_parser("diff", help="what a transformers bump changed: two locks, or a lock and the installed release")
    df.add_argument("old", metavar="OLD", help="a lock: a transformers version in --lock-dir, or a lock file")
    df.add_argument("new", metavar="NEW", help="a lock as OLD, or `installed` (the installed transformers, scanned)")
    df.add_argument("--lock-dir", metavar="DIR", type=types.nonempty("the lock folder"), help="where lock files live (default: the package's harness/zoo/lock)")
    df.add_argument("--json", action="store_true", help="print one JSON document only")
    df.set_defaults(func=cmd_diff)
    zoo.set_defaults(func=lambda args, settings: (say.err(zoo.format_help(), end=""), 2)[1])
    rep = sub.add_parser("repro", help="write a standalone reproducer script for one model under one config")
    rep.add_argument("model", help="model class name")
    rep.add_argument("--config", default="baseline", help="config name from the catalog")
    rep.add_argument("--config-file", help="extra named configs (TOML)")
    rep.add_argument("--base-setting", action="append", default=[], metavar="KEY=VALUE", help="applied to every compile")
    rep.add_argument("--backend", default="count", type=types.backend, help="count | eager | aot_eager | inductor")
    rep.add_argument("--device", default="cpu", type=types.device, help="cpu or cuda[:N]")
    rep.add_argument("--wrong", metavar="SCENARIO:OUTPUT", help="the accuracy reproducer of a wrong result instead: the "
                     "scenario's call (first, second_size, hook_added, weights_updated) and the output that differs, "
                     "e.g. hook_added:logits (ends in torch.testing.assert_close at the [accuracy] tolerances)")
    rep.add_argument("--modes", "--mode", dest="mode", metavar="NAME", type=types.name_list,
                     help="the mode the script runs the model in (one: a script runs in one): eval, train, bf16, fp16, "
                          "train-bf16, dynamic-true, dynamic-marked, sdpa, eager-attention or a [modes.NAME] table "
                          "(default: eval)")
    rep.add_argument("--run", action="store_true", help="also run it in a fresh interpreter and print its result")
    rep.add_argument("-o", "--output", metavar="FILE", type=types.nonempty("the output file"), help="write the script here (default: stdout)")
    rep.set_defaults(func=cmd_repro)


def _selected(args: argparse.Namespace) -> list[Any]:
    from harness import zoo

    cands = zoo.resolve(args.models) if args.models else zoo.candidates()
    if args.sample:
        cands = zoo.sample(cands, args.sample, args.seed)
    return cands


def cmd_list(args: argparse.Namespace, settings: Any) -> int:
    """Print every candidate."""
    from harness import zoo
    from harness.zoo import lock

    try:
        cands = zoo.candidates()
    except zoo.LockError as exc:
        say.err(f"flagsweep zoo list: {exc}")
        return 2
    if args.json:
        say.json([{"model": c.model, "stratum": c.stratum, "kind": c.kind} for c in cands], indent=1)
        return 0
    excluded = lock.current().excluded
    reasons = Counter(r.split(":")[0] for r in excluded.values())
    say.out(render("zoo_list.txt.j2", candidates=cands, counts=dict(sorted(Counter(c.stratum for c in cands).items())),
                   excluded=len(excluded), reasons=dict(reasons.most_common())), end="")
    return 0


def cmd_check(args: argparse.Namespace, settings: Any) -> int:
    """Build + eager forward for the selected models; coverage per stratum, failures by cause."""
    from harness import zoo
    from harness.discovery import check
    from harness.engine import devices
    from state import db

    try:
        cands = _selected(args)
    except zoo.UnknownModel as exc:
        say.err(f"flagsweep zoo check: {exc}")
        return 2
    # The models are checked where sweeps run them: [sweep] python and device (no --python or --device here).
    python, device = settings.sweep.python, settings.sweep.device
    why = devices.unavailable(device, python)
    if why:
        say.err(f"flagsweep zoo check: {settings.source or 'settings'}: [sweep] device = {device!r}: {why}")
        return 2
    _ignore_old_files(settings)
    fingerprints = {}
    for c in cands:
        try:
            fingerprints[c.model] = zoo.fingerprint(c.model)
        except (zoo.BuildError, zoo.LockError):
            pass  # no fingerprint: never kept, always rerun
    timeout = args.timeout or settings.zoo.check_timeout
    conn = db.connect(settings.state_path)
    cached = 0 if args.no_cache else len(check.reused(conn, fingerprints, timeout, check.where_checked(python, device)))
    results = check.check([c.model for c in cands], fingerprints, conn=conn,
                          workers=args.workers or settings.sweep.workers or 0,
                          timeout=timeout, use_kept=not args.no_cache, python=python, device=device,
                          progress=True)  # stderr only: --json keeps stdout to the document
    strata = {c.model: c.stratum for c in cands}
    for r in results:
        r["stratum"] = r["stratum"] or strata.get(r["model"])
    doc = check.summarize(results)
    if args.json:
        say.json(doc, indent=1)
    else:
        say.out(render("zoo_check.txt.j2", doc=doc, groups=check.group_failures(doc["failures"]),
                       cached=cached, store=str(settings.state_path)), end="")
    return 0 if doc["ok"] == doc["candidates"] else 1


def _ignore_old_files(settings: Any) -> None:
    """One log line for each file where an older flagsweep kept zoo results beside the store: it is ignored now."""
    old = Path(settings.zoo.cache_dir) if settings.zoo.cache_dir else Path(settings.state_path).parent / "zoo-cache"
    for path in (old / "zoo-check.json", old / "lock-stage"):
        if path.exists():
            log.info("ignoring %s: the zoo keeps its results in the store %s now (the file can be deleted)",
                     path, settings.state_path)


def cmd_lock(args: argparse.Namespace, settings: Any) -> int:
    """Write the locked corpus (or, with --check, say whether it is stale)."""
    from harness.discovery import check, locker
    from harness.zoo import UnknownModel, lock
    from state import db

    again = "--reverify" if args.reverify else "--modes-probe" if args.modes_probe else None
    if again and (args.lock_dir or args.check or args.fresh or args.reverify and args.modes_probe):
        say.err(f"flagsweep zoo lock: {again} works on the package's lock alone (what sweeps build from); it takes "
                "no --lock-dir, --check, --fresh, or the other of --reverify and --modes-probe")
        return 2
    if args.lock_dir and Path(args.lock_dir).exists() and not Path(args.lock_dir).is_dir():
        # checked before discovery runs (an hour for the whole corpus), not when the lock is written after it
        say.err(f"flagsweep zoo lock: --lock-dir {args.lock_dir} is a file; pass the folder the lock files live in")
        return 2
    _ignore_old_files(settings)
    common = dict(patterns=list(args.models), sample_n=args.sample, seed=args.seed, workers=args.workers or settings.sweep.workers or 0,
                  timeout=args.timeout, python=settings.sweep.python,
                  lock_dir=Path(args.lock_dir) if args.lock_dir else lock.LOCK_DIR, progress=True)
    try:
        if again:
            job = locker.REVERIFY_JOB if args.reverify else locker.MODES_JOB
            result = locker.reverify_corpus(db.connect(settings.state_path),
                                            **{k: v for k, v in common.items() if k != "lock_dir"}, job=job)
        elif args.check:
            report = locker.check_lock(**common)
            if args.json:
                say.json(report, indent=1)
            else:
                say.out(render("zoo_lock_check.txt.j2", report=report), end="")
            return 1 if report["stale"] else 0
        else:
            result = locker.lock_corpus(db.connect(settings.state_path), fresh=args.fresh, **common)
    except (UnknownModel, locker.ScanFailed, lock.LockError) as exc:
        say.err(f"flagsweep zoo lock: {exc}")
        return 2
    chosen = [result.entries[m] for m in sorted(result.entries)]
    doc = check.summarize(check.result_of_entry(e) for e in chosen)
    if args.json:
        say.json({"lock": str(result.path.name), "locked": result.locked, "resumed": result.resumed,
                  "downgraded": result.downgraded, **doc}, indent=1)
    else:
        say.out(render("zoo_lock.txt.j2", locked=len(result.locked), resumed=len(result.resumed), path=result.path.name,
                       doc=doc, groups=check.group_failures(doc["failures"]), cached=0, store=""), end="")
    for d in result.downgraded:
        say.err(render("zoo_lock_downgrade.txt.j2", d=d), end="")
    return 1 if result.downgraded else 0


def _diff_side(what: str, lock_dir: Path, settings: Any) -> Any:
    """A side of `zoo diff`: `installed` (scanned in the workers' interpreter), a lock file, or a version's lock."""
    from harness.discovery import locker
    from harness.zoo import lock, lockdiff

    if what == "installed":
        return lockdiff.from_scan(locker.scan(settings.sweep.python))
    path = Path(what)
    if not path.is_file():
        path = lock.lock_path(what, lock_dir)
        if not path.is_file():
            raise lock.LockError(f"{what} is neither a lock file nor a version with a lock in {lock_dir}")
    return lockdiff.from_lock(lock.read(path))


def cmd_diff(args: argparse.Namespace, settings: Any) -> int:
    """Compare two locks (or a lock and the installed transformers): classes, entries and modeling sources."""
    from harness.discovery import locker
    from harness.zoo import LockError, lock, lockdiff

    lock_dir = Path(args.lock_dir) if args.lock_dir else lock.LOCK_DIR
    try:
        doc = lockdiff.compare(_diff_side(args.old, lock_dir, settings), _diff_side(args.new, lock_dir, settings))
    except (LockError, locker.ScanFailed) as exc:
        say.err(f"flagsweep zoo diff: {exc}")
        return 2
    if args.json:
        say.json(doc, indent=1)
    else:
        say.out(render("zoo_diff.txt.j2", doc=doc), end="")
    return 1 if doc["corrupt"] else 0     # as `zoo lock --check`: a corrupt entry needs a re-lock


def cmd_repro(args: argparse.Namespace, settings: Any) -> int:
    """Write (and optionally run) a standalone reproducer."""
    from bot.verify.script import NotRenderable, render_script
    from bot.verify.steps import render_and_check
    from bot.verify.wrong_script import model_output, model_parameter, render_wrong
    from harness.engine import configs as configs_mod
    from harness.engine import engine
    from harness import zoo
    from harness.engine.script_runner import run_script

    wrong = _wrong_parts(args.wrong) if args.wrong else None
    if isinstance(wrong, str):
        say.err(f"flagsweep repro: --wrong {args.wrong!r}: {wrong}")
        return 2
    mode = types.one_mode(args.mode, settings, "a reproducer runs in one mode")
    if isinstance(mode, str):
        say.err(f"flagsweep repro: {mode}")
        return 2
    try:
        zoo.resolve([args.model])
        catalog = configs_mod.load_catalog(args.config_file or settings.sweep.config_file)
        chosen = configs_mod.select(catalog, [args.config])
        base = dict(configs_mod.parse_setting(s) for s in args.base_setting)
        # Checked in the torch the script will run under, before it is rendered or run.
        configs_mod.validate_all({args.config: chosen[args.config]}, base, settings.sweep.python)
    except (zoo.UnknownModel, configs_mod.ConfigError) as exc:
        say.err(f"flagsweep repro: {exc}")
        return 2
    case = _wrong_case(wrong, args, settings, base, chosen, mode) if wrong else None
    # The model is built in a worker (this process never imports torch); the script embeds that build.
    options = engine.SweepOptions(workers=1, python=settings.sweep.python, device=args.device)
    named = model_output(wrong[1], mode) if wrong else None      # in train: `output.logits`, or a gradient
    parameter = model_parameter(wrong[1], mode) if wrong else None
    problem = _missing_output(args.model, named, options) if named else \
        _missing_parameter(args.model, wrong[1], parameter, options) if wrong and parameter else None
    if problem:
        say.err(f"flagsweep repro: {problem[1]}")
        return problem[0]
    built = engine.describe([args.model], options=options).get(args.model)
    try:
        text = render_wrong(built, case) if case else \
            render_script(built, {**base, **chosen[args.config]}, backend=mode.compiles_under(args.backend),
                          device=args.device, mode=mode)
    except NotRenderable:
        say.err(f"flagsweep repro: {args.model} cannot be built here (see `flagsweep zoo check --models {args.model}`)")
        return 1
    if args.output:
        Path(args.output).write_text(text)
        say.err(f"wrote {args.output}")
    elif not args.run:
        say.data(text)
    python = settings.sweep.python or sys.executable
    if args.run and case:       # under its driver: the result line says whether assert_close failed
        result = render_and_check(built, case, python, settings.verify.timeout)[1]
        say.json(result.to_dict())
        return _wrong_run_status(result)
    elif args.run:
        result = run_script(text, python)
        say.json(result.to_dict())
        return _crash_run_status(result)
    return 0


def _crash_run_status(result: Any) -> int:
    """`repro --run`'s exit status for a crash reproducer: 0 when the script ran and said how (its compile raised:
    reproduced; or it did not), 1 when it ended any other way: a hang, a death, a line this flagsweep cannot read,
    an interpreter that would not start (said in one line on stderr)."""
    from harness.engine.script_runner import RAN

    if result.status in RAN:
        return 0
    why = f": {result.error}" if result.error else ""
    say.err(f"flagsweep repro: the script ended without its result line ({result.status}{why})")
    return 1


def _wrong_parts(text: str) -> tuple[str, str] | str:
    """(scenario, output) of `--wrong SCENARIO:OUTPUT`, or what is wrong with it."""
    from harness.core.calls import output_path
    from harness.core.record import RecordError

    scenario, _, output = text.partition(":")
    if scenario not in SCENARIOS or not output:
        return f"expected SCENARIO:OUTPUT with SCENARIO one of {', '.join(SCENARIOS)}"
    try:
        output_path(output)
    except RecordError:
        return f"OUTPUT {output!r} is not an output path (name, [0], name[1], name.key, ...)"
    return scenario, output


def _asked(model: str, job: str, options: Any) -> list[str] | tuple[int, str]:
    """The names a worker's job answers for `model` (built from the lock), or (1, why) when it cannot be built."""
    from harness.engine import engine

    answers = list(engine.run_job(job, [model], options=options))
    found = answers[0] if answers else None
    if found is None or found.status != "ok":
        why = found.error if found is not None else "no answer from the worker"
        return 1, f"{model} cannot be built here ({why}; see `flagsweep zoo check --models {model}`)"
    return list(found.data)


def _missing_output(model: str, output: str, options: Any) -> tuple[int, str] | None:
    """(exit status, why) when `output` names none of the model's outputs (asked in a worker: built, one eager
    forward: 1 when that fails, 2 for an output it lacks); None when it names one."""
    names = _asked(model, "harness.engine.scenarios:output_paths", options)
    if isinstance(names, tuple):
        return names
    if any(name == output or name.startswith((output + ".", output + "[")) for name in names):
        return None
    more = f" (and {len(names) - 12} more)" if len(names) > 12 else ""
    return 2, f"--wrong OUTPUT {output!r}: {model} has no such output; its outputs: {', '.join(names[:12])}{more}"


def _missing_parameter(model: str, output: str, parameter: str, options: Any) -> tuple[int, str] | None:
    """(exit status, why) when a gradient's `parameter` is none of the model's (asked in a worker: built, nothing
    run; 1 when it cannot be built, 2 for a name it lacks, said with the few names closest to it); None when it is."""
    import difflib

    names = _asked(model, "harness.engine.scenarios:parameter_names", options)
    if isinstance(names, tuple):
        return names
    if parameter in names:
        return None
    # a model has hundreds of parameters: the line names the few a mistyped one was most likely meant as
    near = difflib.get_close_matches(parameter, names, n=4, cutoff=0.0)
    return 2, (f"--wrong OUTPUT {output!r}: {model} has no parameter {parameter!r}; the closest of its {len(names)}: "
               f"{', '.join(near)}")


def _wrong_run_status(result: Any) -> int:
    """`repro --wrong --run`'s exit status: 0 when the script ran to its comparison (failed there: reproduced; or
    passed), 1 when it failed in any other way (said in one line on stderr)."""
    from bot.verify.wrong_script import MISMATCH

    if result.status == "ok" or result.exception == MISMATCH:
        return 0
    say.err(f"flagsweep repro: the script failed before its comparison ({result.exception or result.status})")
    return 1


def _wrong_case(wrong: tuple[str, str], args: argparse.Namespace, settings: Any, base: dict, chosen: dict,
                mode: Any) -> Any:
    """The wrong result `--wrong` names, as the verify step checks it: its signature, both settings, tolerances."""
    from bot.verify.wrong_script import Case
    from harness.core.calls import Call
    from harness.core.correctness import wrong_signature

    scenario, output = wrong
    signature = wrong_signature(Call(scenario, accuracy="wrong", output=output))
    return Case(signature, {**base, **chosen[args.config]}, {**base, **chosen["baseline"]}, args.backend, args.device,
                settings.accuracy.rtol, settings.accuracy.atol, mode)
