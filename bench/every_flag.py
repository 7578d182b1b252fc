"""Benchmark (not a test): a stratified sample x `all-dynamo`: pruned and pooled, pruned only, and neither.

The pooled pass (the default: read-set pruning, then the read flags compiled together) and the pruned-only pass
sweep --sample models (each with its audit: at least 20 pairs traced again); the unpruned pass sweeps the first
--unpruned of them. Prints traced, pruned and pooled items, the pruning ratio per flag, items per core-minute
counting pruned and pooled items as done, the audit's agreement, and the projection for the whole corpus
(CORPUS_CLASSES) on a 16-core runner. --checks: the pooled pass with the checks off, then on (the later calls and
the accuracy oracle, harness.core.options.Accuracy), on the same sample: the wall ratio (target 1.3), the projection
with them on (target 120 min), the items answered (by rule: from the baseline, or from a sibling) and the answer
audit's disagreements (target 0).
The projection with the checks on is printed twice. The old one scales the whole pass's wall by the corpus, the
audits' seconds included. The new one scales the items' phase alone by the corpus (the audits' parts drawn in the
groups are in it, and grow with it as their share does); each audit's traces after the items are projected from their
own count at corpus size, at the seconds each cost here: the answer audit's, its size (one answered item of every
config, the share of all answered, the least) less what the groups audit (the share, where they did any), at least
as many as here (the configs no group's sample covered); the pruning audit's, its size over the corpus's pruned
pairs less what the groups audit (all of it, where they did any). With the checks on it also counts the items whose
later calls were made in full by why the screen did not answer them (events.Result.traced_why), and the pooled ones.
--checks --no-answer: the pass with the checks on traces every later call in full (answering off); it prints how
many items the screen would have answered, and how many of those differ from their full trace (the miss rate,
target 0): the answered item is its own first call and the baseline's later calls, compared call by call.

    nice .venv/bin/python bench/every_flag.py --sample 60 --unpruned 10 --workers 2
    nice .venv/bin/python bench/every_flag.py --sample 8 --checks --workers 2
    nice .venv/bin/python bench/every_flag.py --sample 4 --checks --no-answer --workers 2
    nice .venv/bin/python bench/every_flag.py --models AlbertModel,BioGptForCausalLM,T5Model,ViTModel --checks \
        --no-answer --only-on --workers 2   # the second sample's misses
    nice .venv/bin/python bench/every_flag.py --models BertModel,GPT2Model --checks --no-answer --workers 1
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sweep_common import corpus_models, machine  # noqa: E402
from harness.core.options import Accuracy  # noqa: E402
from harness.core.outcome import ANSWERED, NOT_READ, POOLED  # noqa: E402
from harness.engine.flags import sets as flagsets, space as configspace  # noqa: E402
from harness.engine.engine import SweepRequest  # noqa: E402
from harness.engine.engine import SweepOptions, sweep  # noqa: E402
from harness.engine.flags import answering  # noqa: E402
from harness.engine.flags.pruning import Pruning, size as audit_size  # noqa: E402
from state import db, runs  # noqa: E402
from state import flags as pruning  # noqa: E402

RUNNER_CORES = 16
CORPUS_CLASSES = 976


TARGET_RATIO = 1.3
TARGET_MIN = 120.0


def workers_cpu() -> float:
    """CPU seconds of the ended workers (reaped with their pool): less swayed than wall by a shared machine's load."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def one_pass(models: list[str], configs: dict[str, dict], workers: int, prune: bool, pool: bool = True,
             accuracy: Accuracy = Accuracy(enabled=False)) -> dict:
    """One stored sweep in a throwaway store: its outcomes, audits, wall time and its workers' CPU seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = db.connect(Path(tmp) / "bench.sqlite")
        start, cpu = time.perf_counter(), workers_cpu()
        swept = sweep(conn, SweepRequest(models=models, configs=configs, base_settings={},
                      options=SweepOptions(workers=workers, timeout=600, accuracy=accuracy), progress=True,
                      pruning=Pruning(frozenset(configs) - {"baseline"}, pool=pool) if prune else None))
        run_id = swept.run.id
        wall = time.perf_counter() - start
        audits = conn.execute("SELECT model, config FROM prune_audits WHERE run_id = ?", (run_id,)).fetchall()
        return {"wall": wall, "cpu": workers_cpu() - cpu, "seconds": swept.seconds, "after": swept.after,
                "traced_why": swept.traced_why,
                "outcomes": runs.outcomes(conn, run_id),
                "audited": [tuple(a) for a in audits],
                "audit": pruning.audit_summary(conn, run_id), "answers": pruning.answer_audit(conn, run_id),
                "screened": pruning.answered(conn, run_id, screened=True)}


def dynamo_configs() -> dict[str, dict]:
    """baseline and every Dynamo flag of the torch under test (the `all-dynamo` set)."""
    _, space = configspace.discover("count")
    return {"baseline": {}, **flagsets.expand("all-dynamo", space, flagsets.load_exclusions())}


def projection(models: list[str], workers: int) -> float:
    """The pooled pass with the checks off on `models` x every Dynamo flag: the whole corpus's minutes on
    RUNNER_CORES cores, as measured by this run (what bench/accuracy_cost.py scales by its on / off ratio)."""
    configs = dynamo_configs()
    res = one_pass(models, configs, workers, prune=True)
    return CORPUS_CLASSES * len(configs) / report("every flag, checks off", res, workers, len(configs)) / RUNNER_CORES


def report(name: str, res: dict, workers: int, n_configs: int) -> float:
    """Print one pass's numbers; returns its items per core-minute (pruned items count as done)."""
    outs = res["outcomes"]
    pruned = sum(o.reason == NOT_READ for o in outs)   # the audited pairs were traced: not counted here
    pooled = sum(o.reason == POOLED for o in outs)
    rate = len(outs) / (res["wall"] * workers / 60.0)
    print(f"{name}: {len(outs)} items ({len(outs) - pruned - pooled} traced alone, {len(res['audited'])} of them by "
          f"the audit; {pruned} pruned, {pooled} pooled) in {res['wall']:.1f}s wall on {workers} workers: "
          f"{rate:.2f} items per core-minute")
    print("  wall by phase: " + ", ".join(f"{phase} {s:.1f}s" for phase, s in res["seconds"].items()))
    whole = CORPUS_CLASSES * n_configs
    print(f"  whole corpus ({CORPUS_CLASSES} classes x {n_configs} configs = {whole} items) on {RUNNER_CORES} cores: "
          f"{whole / rate / RUNNER_CORES:.1f} min")
    return rate


def per_flag(res: dict, n_models: int) -> None:
    """The pruning ratio of each flag: pairs pruned (the audited ones included) over the models swept."""
    pruned = Counter(o.config for o in res["outcomes"] if o.reason == NOT_READ)
    pruned.update(config for _, config in res["audited"])
    ratios = sorted(((pruned[c] / n_models, c) for c in {o.config for o in res["outcomes"]} - {"baseline"}),
                    reverse=True)
    print("pruning ratio per flag (pruned pairs / models):")
    for ratio, config in ratios:
        print(f"  {ratio:5.0%}  {config}")
    audit = res["audit"]
    print(f"audit: {audit.agreed} of {audit.audited} agreed ({audit.agreement}%); pruning turned off: "
          f"{', '.join(k for k, _, _ in audit.turned_off) or 'none'}")


def checks(models: list[str], configs: dict[str, dict], workers: int, answer: bool = True,
           only_on: bool = False) -> None:
    """The pooled pass with the checks off, then on: what the later calls and the oracle add to an every-flag sweep;
    `answer` False: every later call made, and the screen's misses counted; `only_on`: the pass with them on alone
    (the misses need no pass without)."""
    off = None if only_on else one_pass(models, configs, workers, prune=True)
    if off is not None:
        report("checks off (pruned and pooled)", off, workers, len(configs))
        print(machine("after the pass with the checks off"))
    on = one_pass(models, configs, workers, prune=True, accuracy=Accuracy(answer=answer))
    rate = report(f"checks on (pruned and pooled{'' if answer else ', answering off'})", on, workers, len(configs))
    whole = CORPUS_CLASSES * len(configs) / rate / RUNNER_CORES
    print(f"whole corpus with the checks on: {whole:.0f} min (old: every phase scaled by the corpus); "
          f"{fixed_costs(on, workers, len(configs)):.0f} min (new: the audits as what they are) "
          f"(target <= {TARGET_MIN:.0f})")
    why_traced(on)
    if off is not None:
        print(f"on / off wall: {on['wall'] / off['wall']:.2f} (target <= {TARGET_RATIO}), workers' CPU seconds "
              f"{on['cpu']:.0f} / {off['cpu']:.0f} = {on['cpu'] / off['cpu']:.2f}")
        # The answer audit traces one answered item of every config at least: a fixed cost per config (about 73
        # traces in the corpus's 71,000 items), which a sample of a few models magnifies.
        fixed = on["seconds"].get("answer audit", 0.0) - off["seconds"].get("answer audit", 0.0)
        print(f"on / off wall without the answer audit's fixed cost: {(on['wall'] - fixed) / off['wall']:.2f}")
    if not answer:
        misses(on)
        return
    answered = [(o.model, o.config) for o in on["outcomes"] if o.reason == ANSWERED]
    differ = [f for f in on["answers"] if f.disagreement]
    rules = Counter(on["screened"].get(pair, "no rule stored") for pair in answered)
    print(f"answered: {len(answered)} items; answer audit: {len(on['answers'])} traced in full, "
          f"{len(differ)} disagreements (target 0)")
    print("  answered by rule: " + "; ".join(f"{n} {rule}" for rule, n in rules.most_common()))
    for f in differ:
        print(f"  {f.model} {f.config}: {f.disagreement}")


def fixed_costs(res: dict, workers: int, n_configs: int, accuracy: Accuracy = Accuracy(),
                pruning: Pruning = Pruning(frozenset())) -> float:
    """The whole corpus's minutes on RUNNER_CORES cores with the per-night audits as what they are (the module
    docstring): the items' phase scaled by the corpus, each audit's traces after it projected at corpus size."""
    outs, seconds, after = res["outcomes"], res["seconds"], res["after"]
    scale = CORPUS_CLASSES * n_configs / len(outs)
    traced = [o for o in outs if o.reason not in (NOT_READ, POOLED)]
    per_item = seconds["items"] * workers / max(1, len(traced))   # a trace's core-seconds, where an audit made none
    in_answer = max(0, len(res["answers"]) - after.get("answer audit", 0))
    answered = sum(o.reason == ANSWERED for o in outs) + sum(bool(f.disagreement) for f in res["answers"])
    configs = {o.config for o in outs if o.reason == ANSWERED} | {f.config for f in res["answers"]}
    want = max(accuracy.answer_audit_min, math.ceil(accuracy.answer_audit * answered * scale), len(configs))
    in_groups = accuracy.answer_audit * answered * scale if in_answer else 0.0
    answers = max(want - in_groups, after.get("answer audit", 0)) if answered else 0
    in_prune = max(0, res["audit"].audited - after.get("pruning audit", 0))
    pruned = sum(o.reason in (NOT_READ, POOLED) for o in outs) + in_prune
    prunes = 0 if in_prune else audit_size(round(pruned * scale), pruning)
    core_s = seconds["items"] * workers * scale + sum(
        n * (seconds[phase] * workers / after[phase] if after.get(phase) else per_item)
        for phase, n in (("answer audit", answers), ("pruning audit", prunes)))
    return core_s / 60.0 / RUNNER_CORES


def why_traced(res: dict) -> None:
    """The items whose later calls were made in full with the checks on, counted by why the screen did not answer
    them (the baselines left out), and the items stored as a pool's (their calls made by the pool's compile)."""
    why = Counter(res["traced_why"])
    why["pooled (the pool's compile made the calls)"] = sum(o.reason == POOLED for o in res["outcomes"])
    print(f"later calls made in full: {sum(why.values())} items, by why the screen did not answer them:")
    for reason, n in why.most_common():
        print(f"  {n:4d}  {reason}")


def misses(res: dict) -> None:
    """Of the items traced in full that the screen would have answered: how many differ from their answered form."""
    outs = {(o.model, o.config): o for o in res["outcomes"]}
    traced = sum(o.reason in (None, POOLED) and len(o.calls) > 1 for o in outs.values() if o.config != "baseline")
    differ = []
    for (model, config), rule in sorted(res["screened"].items()):
        full, base = outs[model, config], outs[model, "baseline"]
        answered = dataclasses.replace(full, calls=answering.answered_calls(full.calls[0], base.calls))
        why = answering.disagreement(answered, full)
        if why:
            differ.append((model, config, why))
    print(f"the screen would have answered {len(res['screened'])} of {traced} items compiled with later calls (alone or "
          f"in a pool); {len(differ)} of them differ from their full trace (target 0)")
    for model, config, why in differ:
        print(f"  {model} {config}: {why}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=60, help="models in the pruned pass (stratified)")
    ap.add_argument("--unpruned", type=int, default=10, help="models in the unpruned pass (the first of the sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--checks", action="store_true", help="the pooled pass with the checks off, then on, only")
    ap.add_argument("--no-answer", action="store_true", help="with --checks: every later call made; the misses")
    ap.add_argument("--only-on", action="store_true", help="with --checks: the pass with the checks on alone")
    ap.add_argument("--models", help="these models (comma-separated) instead of a stratified sample")
    args = ap.parse_args()
    configs = dynamo_configs()
    models = args.models.split(",") if args.models else corpus_models(args.sample, args.seed)
    print(f"{len(models)} models x {len(configs)} configs (all-dynamo + baseline): {', '.join(models)}")
    print(machine("at the start"))
    if args.checks:
        checks(models, configs, args.workers, answer=not args.no_answer, only_on=args.only_on)
        print(machine())
        return 0
    pooled = one_pass(models, configs, args.workers, prune=True)
    pooled_rate = report("pruned and pooled", pooled, args.workers, len(configs))
    pruned = one_pass(models, configs, args.workers, prune=True, pool=False)
    rate = report("pruned only", pruned, args.workers, len(configs))
    per_flag(pruned, len(models))
    print(f"pooling speed-up over pruning alone: {pooled_rate / rate:.2f}x items per core-minute")
    if args.unpruned:
        plain = one_pass(models[:args.unpruned], configs, args.workers, prune=False)
        plain_rate = report(f"unpruned ({args.unpruned} models)", plain, args.workers, len(configs))
        print(f"pruning speed-up: {rate / plain_rate:.2f}x, pruning and pooling: {pooled_rate / plain_rate:.2f}x "
              "items per core-minute")
    print(machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
