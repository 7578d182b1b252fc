"""Dynamo's defaults that are wrong by design in a scenario, and the baseline findings each one explains.

The reviewed table is dynamo_defaults.toml: per scenario, the setting whose documented default gives wrong results
there (hooks added after compiling are not guarded: `skip_nnmodule_hook_guards=True`), the value that changes it,
torch's words and its documentation. The rule: a baseline finding (harness.core.effects.baseline_findings) whose
first wrong call is in a listed scenario is that default's; it folds under its cause, one line per (scenario,
cause) with its models, and every other finding stays one line per model. Where the run swept a config that makes
the changing setting, the cause says what it did to those models in that scenario (`Swept`). Stdlib only.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core.calls import FIRST, SCENARIOS
from harness.core.effects import BASELINE, BaselineFinding, baseline_findings
from harness.core.files import table_entries
from harness.core.outcome import Outcome
from harness.core.record import RecordError

TABLE = Path(__file__).with_name("dynamo_defaults.toml")
MODULE = "torch._dynamo.config."
# Each field of an entry and the types its value may have (a setting's value: a TOML scalar).
SCALARS = (bool, int, float, str)
FIELDS: dict[str, tuple[type, ...]] = {"scenario": (str,), "key": (str,), "default": SCALARS, "changed_by": SCALARS,
                                       "why": (str,), "docs": (str,)}


@dataclass(frozen=True)
class Default:
    """One reviewed entry: `key` at its `default` gives wrong results in `scenario` by design; `changed_by` changes
    it (`why`: torch's words; `docs`: where the torch.compile documentation describes it)."""

    scenario: str
    key: str
    default: Any
    changed_by: Any
    why: str
    docs: str

    @property
    def name(self) -> str:
        """The setting's short name (`skip_nnmodule_hook_guards`)."""
        return self.key.rsplit(".", 1)[-1]

    @property
    def default_setting(self) -> str:
        """`skip_nnmodule_hook_guards=True`: the default, as a config names it."""
        return f"{self.name}={self.default!r}"

    @property
    def changed_setting(self) -> str:
        """`skip_nnmodule_hook_guards=False`: the setting that changes it."""
        return f"{self.name}={self.changed_by!r}"

    def sets(self, settings: Mapping[str, Any]) -> bool:
        """Whether a config's settings make the changing value (True is not 1: the type must match too)."""
        return self.key in settings and _same(settings[self.key], self.changed_by)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def load(path: Path = TABLE) -> dict[str, Default]:
    """{scenario: Default}; RecordError (one line naming the file, the entry and the key) on an unreadable or empty
    table, an unknown or missing key, a value of the wrong type, or a scenario listed twice."""
    found: dict[str, Default] = {}
    for where, row in table_entries(path, "Dynamo defaults table", "default", RecordError):
        entry = _entry(row, where)
        if entry.scenario in found:
            raise RecordError(f"{where}: scenario {entry.scenario!r} is listed twice")
        found[entry.scenario] = entry
    return found


def _entry(row: Any, where: str) -> Default:
    """One entry: its keys and their types first, then what the values must say."""
    if not isinstance(row, dict):
        raise RecordError(f"{where}: an entry is a table of {', '.join(FIELDS)}")
    for key in row:
        if key not in FIELDS:
            raise RecordError(f"{where}: unknown key {key!r} (one of {', '.join(FIELDS)})")
    for key, types in FIELDS.items():
        if key not in row:
            raise RecordError(f"{where}: missing key {key!r}")
        if not isinstance(row[key], types):
            raise RecordError(f"{where}: key {key!r} is of type {type(row[key]).__name__}, "
                              f"expected {' or '.join(t.__name__ for t in types)}")
    return _checked(Default(**row), where)


def _checked(entry: Default, where: str) -> Default:
    """`entry` when its values say what the table means (a later scenario, a Dynamo setting, a real change)."""
    if entry.scenario not in SCENARIOS or entry.scenario == FIRST:
        raise RecordError(f"{where}: key 'scenario': {entry.scenario!r} is not a later call "
                          f"({', '.join(s for s in SCENARIOS if s != FIRST)})")
    if not entry.key.startswith(MODULE) or not entry.name.isidentifier():
        raise RecordError(f"{where}: key 'key': {entry.key!r} is not a setting under {MODULE.rstrip('.')}")
    if type(entry.changed_by) is not type(entry.default) or entry.changed_by == entry.default:
        raise RecordError(f"{where}: key 'changed_by': {entry.changed_by!r} does not change the default "
                          f"{entry.default!r} (another value of the same type)")
    if not entry.why.strip():
        raise RecordError(f"{where}: key 'why' is empty (torch's words on why the default is wrong there)")
    if not entry.docs.startswith("https://"):
        raise RecordError(f"{where}: key 'docs': {entry.docs!r} is not an https:// link")
    return entry


@dataclass(frozen=True)
class Swept:
    """What a config of the run that makes the changing setting did to a cause's models, in the cause's scenario."""

    config: str
    right: tuple[str, ...]          # the scenario's call right (exact or close)
    wrong: tuple[str, ...]          # still wrong: the default is not the whole story there
    unjudged: tuple[str, ...]       # not traced alone (pruned, pooled), crashed, absent, or the call not judged


@dataclass(frozen=True)
class Cause:
    """The baseline findings one default explains, with what the run's sweep of its changing setting did."""

    default: Default
    findings: tuple[BaselineFinding, ...]
    swept: tuple[Swept, ...]

    @property
    def models(self) -> list[str]:
        """The models it folds away, by name."""
        return [f.model for f in self.findings]


@dataclass(frozen=True)
class Findings:
    """A run's baseline findings as shown: folded under their causes, and the rest one per model."""

    causes: tuple[Cause, ...]
    alone: tuple[BaselineFinding, ...]

    def __bool__(self) -> bool:
        return bool(self.causes or self.alone)

    @property
    def every(self) -> list[BaselineFinding]:
        """Every finding, by model (a body's material; the folding is derived from it)."""
        return sorted((*self.alone, *(f for c in self.causes for f in c.findings)), key=lambda f: f.model)


def explain(outcomes: Iterable[Outcome], configs: Mapping[str, Mapping[str, Any]],
            table: Mapping[str, Default]) -> Findings:
    """The run's baseline findings folded by cause (`table`, by scenario); `configs`: the run's {name: settings}."""
    outcomes = list(outcomes)
    found = baseline_findings(outcomes)
    causes = []
    for scenario, default in table.items():
        mine = tuple(f for f in found if f.scenario == scenario)
        if mine:
            causes.append(Cause(default, mine, _swept(default, [f.model for f in mine], outcomes, configs)))
    return Findings(tuple(causes), tuple(f for f in found if f.scenario not in table))


def _swept(default: Default, models: list[str], outcomes: list[Outcome],
           configs: Mapping[str, Mapping[str, Any]]) -> tuple[Swept, ...]:
    """Per config of the run that makes `default.changed_by`: its models right, still wrong, and not judged."""
    swept = []
    for config in sorted(c for c, settings in configs.items() if c != BASELINE and default.sets(settings)):
        items = {o.model: o for o in outcomes if o.config == config}
        verdicts = {m: _verdict(items.get(m), default.scenario) for m in models}
        swept.append(Swept(config, *(tuple(m for m in models if verdicts[m] == v) for v in ("right", "wrong", None))))
    return tuple(swept)


def _verdict(item: Outcome | None, scenario: str) -> str | None:
    """"right" or "wrong" for the item's call in `scenario`; None when it was not traced alone or not judged (an
    outcome pruned or pooled carries the baseline's calls, which say nothing about the flag)."""
    if item is None or item.reason is not None or item.status != "ok":
        return None
    call = next((c for c in item.calls if c.scenario == scenario), None)
    if call is None or not (call.right or call.wrong):
        return None
    return "right" if call.right else "wrong"
