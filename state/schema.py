"""Schema migrations of the flagsweep store, as code.

MIGRATIONS[i] takes a database from version i to version i + 1. Never edit a
migration that has shipped: add a new one. tests/test_store_migrations.py
builds a database at every earlier version and migrates it.
"""
from __future__ import annotations

# v0 -> v1: what the sweep engine needs: environments, runs, outcomes.
V1 = """
CREATE TABLE environments (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,          -- sha of the JSON below, to dedupe
    torch_version TEXT, torch_git TEXT, transformers_version TEXT,
    python_version TEXT, device TEXT, cuda_version TEXT,
    flagsweep_version TEXT, recipe_fingerprint TEXT,
    data TEXT NOT NULL                 -- the full environment as JSON
);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL DEFAULT 'sweep',   -- sweep | nightly | command | confirm
    environment_id INTEGER REFERENCES environments(id),
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL DEFAULT 'running', -- running | finished | interrupted | failed
    reason TEXT,                            -- why a run failed
    models TEXT NOT NULL,                   -- JSON list of model names
    configs TEXT NOT NULL,                  -- JSON {name: {key: value}}
    base_settings TEXT NOT NULL DEFAULT '{}',
    options TEXT NOT NULL DEFAULT '{}'      -- backend, device, timeout, ...
);
CREATE TABLE outcomes (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    graphs INTEGER,
    signature TEXT,
    fingerprint TEXT,
    data TEXT NOT NULL,                     -- the whole Outcome as JSON
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (run_id, model, config)
);
"""

# v1 -> v2: run history, issue filing and the service.
V2 = """
ALTER TABLE runs ADD COLUMN nightly TEXT;   -- nightly date (YYYY-MM-DD) when kind = nightly
ALTER TABLE runs ADD COLUMN shard TEXT;     -- "i/N" for a shard of a nightly
CREATE TABLE effects (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    stratum TEXT,
    effect TEXT NOT NULL,
    baseline_graphs INTEGER, config_graphs INTEGER,
    baseline_signature TEXT, config_signature TEXT,
    PRIMARY KEY (run_id, model, config)
);
CREATE TABLE signatures (
    config TEXT NOT NULL,
    signature TEXT NOT NULL,
    first_run INTEGER, last_run INTEGER,
    first_seen TEXT, last_seen TEXT,       -- nightly dates or timestamps
    nightlies_seen INTEGER NOT NULL DEFAULT 0,
    models TEXT NOT NULL DEFAULT '[]',     -- JSON list, latest run
    error_type TEXT, torch_frame TEXT, example_message TEXT,
    PRIMARY KEY (config, signature)
);
CREATE TABLE issue_links (
    key TEXT PRIMARY KEY,                  -- the marker key, flagsweep:key=<key>
    repo TEXT NOT NULL,
    number INTEGER NOT NULL,
    kind TEXT NOT NULL,                    -- tracking | summary
    config TEXT, signature TEXT,
    state TEXT NOT NULL DEFAULT 'open',    -- open | closed
    closed_by TEXT,                        -- bot | human
    muted INTEGER NOT NULL DEFAULT 0,
    cc TEXT NOT NULL DEFAULT '[]',         -- extra handles added by command
    quiet_nightlies INTEGER NOT NULL DEFAULT 0,
    body_sha TEXT, title TEXT,
    updated_at TEXT
);
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY,
    run_id INTEGER,
    batch TEXT NOT NULL,                   -- one publish = one batch
    seq INTEGER NOT NULL,                  -- order inside the batch
    key TEXT NOT NULL,                     -- issue marker key it concerns
    action TEXT NOT NULL,                  -- create | edit | comment | close | reopen | labels | react
    payload TEXT NOT NULL,                 -- JSON: title, body, labels, ...
    status TEXT NOT NULL DEFAULT 'pending',-- pending | sending | done | failed
    attempts INTEGER NOT NULL DEFAULT 0,
    result TEXT, error TEXT,
    created_at TEXT NOT NULL, done_at TEXT
);
CREATE INDEX outbox_status ON outbox(status, batch, seq);
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,                    -- nightly | command
    payload TEXT NOT NULL,                 -- JSON
    status TEXT NOT NULL DEFAULT 'queued', -- queued | running | done | failed
    created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT,
    result TEXT, error TEXT
);
CREATE TABLE deliveries (
    id TEXT PRIMARY KEY,                   -- X-GitHub-Delivery
    event TEXT NOT NULL,
    received_at TEXT NOT NULL,
    outcome TEXT NOT NULL                  -- queued | ignored | rejected
);
"""

# v2 -> v3: indexes for history: signature history is rebuilt from outcomes by
# (config, signature), and shards of a nightly are found by their date.
V3 = """
CREATE INDEX outcomes_config_signature ON outcomes(config, signature);
CREATE INDEX runs_nightly ON runs(kind, nightly);
CREATE INDEX effects_config ON effects(config, effect);
"""

# v3 -> v4: one exclusive claim per run being executed (state/leases.py). A
# second process may resume a run only when the holder is gone: its pid no
# longer exists on this host, or its heartbeat stopped before `expires`.
V4 = """
CREATE TABLE run_leases (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id),
    holder TEXT NOT NULL,                  -- random token of the holding process
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    pid_started TEXT,                      -- the holder's start time (/proc), so a reused pid is not taken for it
    acquired_at TEXT NOT NULL,
    heartbeat REAL NOT NULL,               -- unix time of the last heartbeat
    expires REAL NOT NULL                  -- unix time after which the lease is free
);
"""

# v4 -> v5: a command job that failed because GitHub was down waits in the queue
# for its next attempt (retry_at, epoch seconds) until retry_until, then fails.
V5 = """
ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN retry_at REAL;
ALTER TABLE jobs ADD COLUMN retry_until REAL;
CREATE INDEX jobs_status ON jobs(status, kind, id);
"""

# v5 -> v6: what a reproducer needs, per model of a run, as plain data (built config,
# input spec, config class, fingerprint, transformers version), stored by the engine
# so the bot renders reproducers without building models or importing torch.
V6 = """
CREATE TABLE run_models (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    data TEXT NOT NULL,                     -- JSON: config_class, config, spec, fingerprint, ...
    PRIMARY KEY (run_id, model)
);
"""

# v6 -> v7: graph-break ids (Dynamo's registry, looked up in the torch under test): the id of an
# Unsupported error beside its signature, and each recorded graph-break reason with its id.
V7 = """
ALTER TABLE outcomes ADD COLUMN gb_id TEXT;
CREATE TABLE graph_breaks (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    position INTEGER NOT NULL,             -- order of the reasons, most frequent first
    reason TEXT NOT NULL,                  -- Dynamo's counter text
    gb_id TEXT,                            -- GB0124, or NULL where the registry has none
    PRIMARY KEY (run_id, model, config, position)
);
CREATE INDEX graph_breaks_id ON graph_breaks(gb_id, config);
"""

# v7 -> v8: regression ranges. For a nightly's confirmed new crash or fix of one (config, signature),
# the last build that behaved like the previous run ("good") and the first that behaved like this one
# ("bad"), found by bisecting the index's nightlies between the two runs (bot/ranges/finder.py).
V8 = """
CREATE TABLE ranges (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    config TEXT NOT NULL,
    signature TEXT NOT NULL,
    kind TEXT NOT NULL,                    -- new_crash | fixed
    status TEXT NOT NULL,                  -- found | bounded | no_series | failed
    good_date TEXT, good_version TEXT, good_git TEXT,
    bad_date TEXT, bad_version TEXT, bad_git TEXT,
    models TEXT NOT NULL DEFAULT '[]',     -- JSON list: the models whose transition was searched
    installs INTEGER NOT NULL DEFAULT 0,   -- builds this search probed (each installed once, venvs cached)
    probes TEXT NOT NULL DEFAULT '[]',     -- JSON list: {date, version, git, state} per probed build
    reason TEXT,                           -- why bounded, no_series or failed, and builds skipped
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (run_id, config, signature, kind)
);
CREATE INDEX ranges_key ON ranges(config, signature, kind, run_id);
"""

# v8 -> v9: reproducer verdicts (state/verdicts.py), stored by the pipeline's verify step (bot/verify/) and
# only read by publishing. One verdict per (config, signature, model, fingerprint, torch build), reused by
# later runs when something ran to reach it; per run and tracking group, the verdict and component its issue shows.
V9 = """
CREATE TABLE verdicts (
    key TEXT PRIMARY KEY,                  -- sha of (config, signature, model, fingerprint, [build_version, build_git])
    config TEXT NOT NULL,
    signature TEXT NOT NULL,
    model TEXT NOT NULL,                   -- the smallest affected model, whose reproducer ran
    fingerprint TEXT,
    build_version TEXT, build_git TEXT,    -- the run's torch build
    status TEXT NOT NULL,                  -- confirmed | unconfirmed
    reason TEXT NOT NULL DEFAULT '',
    script TEXT NOT NULL DEFAULT '',       -- the script an issue embeds (the shrunk one when shrunk)
    torch_version TEXT, torch_git TEXT,    -- the torch the script ran on, as it reported it
    shrunk INTEGER NOT NULL DEFAULT 0,     -- a shrink was tried
    shrink TEXT,                           -- JSON {build, stats}: what the shrink kept
    component TEXT,                        -- JSON: the component isolation record
    reusable INTEGER NOT NULL DEFAULT 1,   -- 0: reached without a run, the next verification runs again
    recorded_at TEXT NOT NULL
);
CREATE INDEX verdicts_group ON verdicts(config, signature);
CREATE TABLE run_verdicts (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    config TEXT NOT NULL,
    signature TEXT NOT NULL,
    verdict_key TEXT REFERENCES verdicts(key),  -- NULL: verification was off for this run
    component TEXT,                        -- JSON: the component record the issue shows
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (run_id, config, signature)
);
"""

# v9 -> v10: what the zoo's commands keep between runs (state/zoo.py), in the store rather than in files beside it:
# `zoo check` results, one per model, reused while the model's build fingerprint is the same; and the entries an
# unfinished `zoo lock` has made, so that a lock that crashed resumes where it stopped.
V10 = """
CREATE TABLE zoo_checks (
    model TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,             -- the build checked: its lock entry's hash and the code that builds it
    status TEXT NOT NULL,                  -- ok | create_error | input_error | eager_error | timeout | killed
    timeout_s REAL,                        -- the limit it ran under (a timeout is reused only under no larger one)
    data TEXT NOT NULL,                    -- JSON: the whole result (stratum, cause, text_only, seconds)
    checked_at TEXT NOT NULL
);
CREATE TABLE zoo_lock_entries (
    transformers TEXT NOT NULL,            -- the transformers version the lock is for
    model TEXT NOT NULL,
    entry TEXT NOT NULL,                   -- JSON: the finished lock entry, sealed (harness/zoo/lock.py)
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (transformers, model)
);
"""

# v10 -> v11: the nightly's environment gate (state/gates.py): one verdict per run, `environment_suspect` with its
# reasons; and how the bot's tracking issues ended on GitHub (state/resolutions.py), refreshed each publish from
# the one listing of the bot's issues, for the measured precision.
V11 = """
CREATE TABLE run_gates (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id),
    verdict TEXT NOT NULL,                 -- ok | environment_suspect
    reasons TEXT NOT NULL DEFAULT '[]',    -- JSON list of {kind, ...}: what made it suspect
    checked_at TEXT NOT NULL
);
CREATE TABLE issue_resolutions (
    repo TEXT NOT NULL,
    number INTEGER NOT NULL,
    key TEXT NOT NULL,                     -- the tracking issue's marker key
    resolution TEXT NOT NULL,              -- open | fixed_by_bot | completed | not_planned | duplicate | invalid
    state_reason TEXT,                     -- as GitHub said it
    reopened INTEGER NOT NULL DEFAULT 0,   -- seen reopened at least once (sticky)
    seen_at TEXT NOT NULL,
    PRIMARY KEY (repo, number)
);
"""

# v11 -> v12: the maintainer's script of a verdict (bot/verify/ablation.py): the reproducer a person would write,
# what the oracle made of it and its dynamic ablation (torch.compile dynamic=None/False/True), stored with the
# verdict so a quiet re-publish runs nothing.
V12 = """
ALTER TABLE verdicts ADD COLUMN maintainer TEXT;   -- JSON: state.verdicts.Maintainer (NULL: not tried yet)
"""

# v12 -> v13: every flag (issue 22). The config space each build's torch declares (state/flags.py); per run
# and model the config keys its baseline compile read; pruned effects told apart (effects.reason = 'not_read');
# the pruning audit's re-traced pairs, and the flag keys whose pruning an audit disagreement turned off for good
# (state/flags.py).
V13 = """
ALTER TABLE effects ADD COLUMN reason TEXT;
CREATE TABLE config_spaces (
    environment_id INTEGER PRIMARY KEY REFERENCES environments(id),
    modules TEXT NOT NULL,                 -- JSON list of the config modules listed
    entries TEXT NOT NULL,                 -- JSON {full key: {"type": name, "default": JSON value or repr}}
    recorded_at TEXT NOT NULL
);
CREATE TABLE config_reads (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    reads TEXT NOT NULL,                   -- JSON {full key: value read, or null}
    PRIMARY KEY (run_id, model)
);
CREATE TABLE prune_audits (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    agreed INTEGER NOT NULL,               -- 1: traced, it gave what the pruned outcome said
    traced_status TEXT, traced_graphs INTEGER, traced_signature TEXT,
    PRIMARY KEY (run_id, model, config)
);
CREATE TABLE prune_disabled (
    key TEXT PRIMARY KEY,                  -- a flag's full config key: never pruned again
    config TEXT NOT NULL, model TEXT NOT NULL, run_id INTEGER NOT NULL,
    traced_status TEXT, traced_graphs INTEGER, baseline_graphs INTEGER,
    disabled_at TEXT NOT NULL
);
"""

# v13 -> v14: reproducer work that keeps up with the nightly (bot/verify/): a verdict carried from an earlier
# build's shrunk case, or why it was minimised again, and what it cost; a tracking group left for a later night by
# the verify step's budget; and what each run's verify step cost as a whole.
V14 = """
ALTER TABLE verdicts ADD COLUMN carried_from TEXT;   -- the torch build whose shrunk case it carries (NULL: its own)
ALTER TABLE verdicts ADD COLUMN reminimised TEXT;    -- why it was shrunk again from the full model (NULL: it was not)
ALTER TABLE verdicts ADD COLUMN cost TEXT;           -- JSON: {stages: {stage: seconds}, scripts, tries, kept}
ALTER TABLE run_verdicts ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;   -- 1: past the step's budget, not verified yet
CREATE TABLE verify_steps (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id),
    seconds REAL NOT NULL,                 -- the step's wall time (the last time it ran for the run)
    scripts INTEGER NOT NULL,              -- reproducer scripts it ran
    workers INTEGER NOT NULL,
    groups INTEGER NOT NULL,               -- tracking groups it looked at
    pending INTEGER NOT NULL,              -- of them, left for a later night by the budget
    recorded_at TEXT NOT NULL
);
"""

# v14 -> v15: comment commands hardened (issue 31). What each user's commands cost, kept across restarts (the
# per-user hourly budget, and the refusals already answered on an issue); the dry-run publisher's file numbers, from
# one counter both job lanes share; a comment delivery's id and body hash, so a replay under a new delivery id is
# seen as the same delivery.
V15 = """
CREATE TABLE command_spend (
    login TEXT NOT NULL,                   -- lower case
    repo TEXT NOT NULL,
    issue INTEGER NOT NULL,
    kind TEXT NOT NULL,                    -- run | refused | usage (the budget) | limited (told so)
    at REAL NOT NULL                       -- epoch seconds
);
CREATE INDEX command_spend_login ON command_spend(login, at);
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
ALTER TABLE deliveries ADD COLUMN comment_key TEXT;   -- comment id : hash of action, body, previous body (NULL: none)
CREATE UNIQUE INDEX deliveries_comment ON deliveries(comment_key);
"""

# v15 -> v16: an outcome is read strictly (harness.core.record: an unknown field is an error, not dropped on every
# read), so a stored outcome keeps the fields an Outcome has at v16, once, here; any other key an older engine wrote
# goes. The list is this version's, frozen: a later field is a later migration's business.
_OUTCOME_FIELDS_V16 = ("model", "config", "status", "stratum", "graphs", "graph_breaks", "break_reasons", "break_ids",
                       "ops", "ops_per_graph", "recompiles", "compile_s", "build_s", "peak_mem_mb", "error_type",
                       "error_message", "torch_frame", "signature", "gb_id", "traceback", "fingerprint", "text_only",
                       "attempts", "flaky_rate", "reason")
_KNOWN_V16 = ", ".join(f"'{name}'" for name in _OUTCOME_FIELDS_V16)
V16 = f"""
UPDATE outcomes SET data = (
    SELECT json_group_object(e.key, CASE e.type WHEN 'true' THEN json('true') WHEN 'false' THEN json('false')
                                                WHEN 'object' THEN json(e.value) WHEN 'array' THEN json(e.value)
                                                ELSE e.value END)
    FROM json_each(outcomes.data) AS e WHERE e.key IN ({_KNOWN_V16}))
WHERE EXISTS (SELECT 1 FROM json_each(outcomes.data) AS e WHERE e.key NOT IN ({_KNOWN_V16}));
"""

# v16 -> v17: wrong results and recompiles (issue 30). Beside its graph effect, each effect keeps the two axes judged
# on the item's calls against the baseline's (harness.core.correctness); NULL: not judged (no calls, a crash, and
# every effect stored before).
V17 = """
ALTER TABLE effects ADD COLUMN correctness TEXT;   -- wrong_result | fixes_wrong_result | same_correctness
ALTER TABLE effects ADD COLUMN recompile TEXT;     -- fewer_recompiles | more_recompiles | same_recompiles
"""

# v17 -> v18: from the nightly to the commit (issue 37). A regression range's commit range, kept per (signature,
# good commit, bad commit) so a range is bisected once: its commits with their files and people, the ranked
# suspects, the bisection's outcome and evidence, and a maintainer's `wrong-culprit` (who, when). Logins a person
# removed from an issue's cc (`cc remove`, `wrong-culprit`) are never cc'd there again.
V18 = """
CREATE TABLE commit_ranges (
    signature TEXT NOT NULL,
    good_git TEXT NOT NULL,                -- the main-branch commits of the two builds
    bad_git TEXT NOT NULL,
    status TEXT NOT NULL,                  -- found | suspects | cut | flaky | not_reproduced | bounded | failed
    commits TEXT NOT NULL,                 -- JSON list of harness.core.commits.Commit
    suspects TEXT NOT NULL,                -- JSON list of {sha, score, why}
    bisection TEXT,                        -- JSON state.culprits.Bisection (NULL: none ran)
    reason TEXT,                           -- why it stopped where it did (one line)
    wrong_by TEXT,                         -- the maintainer who said the culprit is wrong
    wrong_at TEXT,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (signature, good_git, bad_git)
);
CREATE TABLE cc_removed (
    key TEXT NOT NULL,                     -- the issue's marker key
    login TEXT NOT NULL,                   -- lower case
    at TEXT NOT NULL,
    PRIMARY KEY (key, login)
);
"""

# v18 -> v19: the later calls answered from the baseline (issue 36). Per run and model, the config keys the baseline
# read in each call window (first, second_size, hook_added, weights_updated: state/flags.py); the nightly audit's
# answered items traced in full, and where one disagreed.
V19 = """
CREATE TABLE window_reads (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    window TEXT NOT NULL,                  -- a call window: first, or a later call's scenario
    reads TEXT NOT NULL,                   -- JSON {full key: value read, or null}
    PRIMARY KEY (run_id, model, window)
);
CREATE TABLE answer_audits (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    disagreement TEXT,                     -- where the full trace differs from the answered item (NULL: it agrees)
    PRIMARY KEY (run_id, model, config)
);
"""

# v19 -> v20: a run's options are one typed record (harness.core.options.RunOptions, read strictly by state.runs).
# A run stored before an option existed gets it once, with what its engine ran then: nothing judged or answered
# before [accuracy] and the answered later calls (accuracy off, answer false), the tolerances the accuracy
# reproducer fell back to, every other option at the value the engine had before it became a setting.
V20 = """
UPDATE runs SET options = json_set(options, '$.workers', 0) WHERE json_type(options, '$.workers') IS NULL;
UPDATE runs SET options = json_set(options, '$.timeout', 300.0) WHERE json_type(options, '$.timeout') IS NULL;
UPDATE runs SET options = json_set(options, '$.backend', 'count') WHERE json_type(options, '$.backend') IS NULL;
UPDATE runs SET options = json_set(options, '$.device', 'cpu') WHERE json_type(options, '$.device') IS NULL;
UPDATE runs SET options = json_set(options, '$.python', NULL) WHERE json_type(options, '$.python') IS NULL;
UPDATE runs SET options = json_set(options, '$.max_items_per_worker', 50) WHERE json_type(options, '$.max_items_per_worker') IS NULL;
UPDATE runs SET options = json_set(options, '$.max_rss_mb', 6000.0) WHERE json_type(options, '$.max_rss_mb') IS NULL;
UPDATE runs SET options = json_set(options, '$.extra_modules', json('[]')) WHERE json_type(options, '$.extra_modules') IS NULL;
UPDATE runs SET options = json_set(options, '$.gpu_workers', 2) WHERE json_type(options, '$.gpu_workers') IS NULL;
UPDATE runs SET options = json_set(options, '$.compile_cache', NULL) WHERE json_type(options, '$.compile_cache') IS NULL;
UPDATE runs SET options = json_set(options, '$.accuracy', json('{"enabled": false}')) WHERE json_type(options, '$.accuracy') IS NULL;
UPDATE runs SET options = json_set(options, '$.accuracy.rtol', 0.001) WHERE json_type(options, '$.accuracy.rtol') IS NULL;
UPDATE runs SET options = json_set(options, '$.accuracy.atol', 0.001) WHERE json_type(options, '$.accuracy.atol') IS NULL;
UPDATE runs SET options = json_set(options, '$.accuracy.answer', json('false')) WHERE json_type(options, '$.accuracy.answer') IS NULL;
UPDATE runs SET options = json_set(options, '$.accuracy.answer_audit', 0.05) WHERE json_type(options, '$.accuracy.answer_audit') IS NULL;
UPDATE runs SET options = json_set(options, '$.accuracy.answer_audit_min', 2) WHERE json_type(options, '$.accuracy.answer_audit_min') IS NULL;
"""

# v20 -> v21: a commit's co-authors are people (harness.core.commits.Person: a name, and a login only where GitHub
# vouches for it), no longer one string that was a login or a name by its shape (issue 45). A co-author stored
# before is kept as a name without a login: it is shown, never mentioned or cc'd again (its shape proved nothing).
V21 = """
UPDATE commit_ranges SET commits = (
    SELECT json_group_array(json(CASE WHEN json_type(c.value, '$.coauthors') = 'array' THEN
        json_set(c.value, '$.coauthors', json((
            SELECT json_group_array(CASE WHEN a.type = 'text' THEN json_object('name', a.value, 'login', NULL)
                                         ELSE json(a.value) END)
            FROM json_each(c.value, '$.coauthors') AS a)))
        ELSE c.value END))
    FROM json_each(commit_ranges.commits) AS c);
"""

# v21 -> v22: the later calls screened (issue 44). Per run, each answered item and the rule that answered it; the
# configs the audit found answered wrong, kept off the rule for their next nights (answer_quarantine, stored with each
# quarantine). A run stored before the setting existed ran with the default, 7.
V22 = """
CREATE TABLE answered_items (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    rule TEXT NOT NULL,                    -- the rule that answered its later calls (harness.engine.flags.answering)
    answered INTEGER NOT NULL DEFAULT 1,   -- 0: the screen passed, but answering was off (traced in full: a bench)
    PRIMARY KEY (run_id, model, config)
);
CREATE TABLE answer_quarantine (
    run_id INTEGER NOT NULL REFERENCES runs(id),   -- the run whose audit found the disagreement
    night TEXT,                                    -- its nightly date (NULL: not a nightly)
    config TEXT NOT NULL,
    nights INTEGER NOT NULL,                       -- how many nights after it the rule stays off for the config
    why TEXT NOT NULL,                             -- the disagreement: model and first call that differed
    PRIMARY KEY (run_id, config)
);
UPDATE runs SET options = json_set(options, '$.accuracy.answer_quarantine', 7)
    WHERE json_type(options, '$.accuracy') IS NOT NULL AND json_type(options, '$.accuracy.answer_quarantine') IS NULL;
"""

# v22 -> v23: a commit range is kept per config too (issue 45): two configs crashing with one signature over one
# nightly range have their own reproducers, so their own bisections, and a `wrong-culprit` on one tracking issue
# marks only its own. Ranges stored before are kept under config '' (searched again once by the next ask).
V23 = """
CREATE TABLE commit_ranges_v23 (
    config TEXT NOT NULL,
    signature TEXT NOT NULL,
    good_git TEXT NOT NULL,
    bad_git TEXT NOT NULL,
    status TEXT NOT NULL,                  -- v18's, and outside | one_of (issue 43)
    commits TEXT NOT NULL,
    suspects TEXT NOT NULL,
    bisection TEXT,
    reason TEXT,
    wrong_by TEXT,
    wrong_at TEXT,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (config, signature, good_git, bad_git)
);
INSERT INTO commit_ranges_v23 (config, signature, good_git, bad_git, status, commits, suspects, bisection, reason,
    wrong_by, wrong_at, recorded_at)
    SELECT '', signature, good_git, bad_git, status, commits, suspects, bisection, reason, wrong_by, wrong_at,
    recorded_at FROM commit_ranges;
DROP TABLE commit_ranges;
ALTER TABLE commit_ranges_v23 RENAME TO commit_ranges;
"""

# v23 -> v24: issues, reproducer verdicts and the signature history carry the mode (issue 46): a train crash is its
# own tracking issue, its own reproducer, its own history, never eval's. `mode` is harness.core.modes.Mode.key: '' for eval, so every row stored before
# modes existed is eval's, as every run stored before them is.
V24 = """
ALTER TABLE issue_links ADD COLUMN mode TEXT NOT NULL DEFAULT '';
ALTER TABLE verdicts ADD COLUMN mode TEXT NOT NULL DEFAULT '';
CREATE TABLE signatures_v24 (
    config TEXT NOT NULL,
    mode TEXT NOT NULL DEFAULT '',
    signature TEXT NOT NULL,
    first_run INTEGER, last_run INTEGER,
    first_seen TEXT, last_seen TEXT,
    nightlies_seen INTEGER NOT NULL DEFAULT 0,
    models TEXT NOT NULL DEFAULT '[]',
    error_type TEXT, torch_frame TEXT, example_message TEXT,
    PRIMARY KEY (config, mode, signature)
);
INSERT INTO signatures_v24 (config, mode, signature, first_run, last_run, first_seen, last_seen, nightlies_seen, models,
    error_type, torch_frame, example_message)
    SELECT config, '', signature, first_run, last_run, first_seen, last_seen, nightlies_seen, models, error_type,
    torch_frame, example_message FROM signatures;
DROP TABLE signatures;
ALTER TABLE signatures_v24 RENAME TO signatures;
"""

# v24 -> v25: a commit range is kept per mode too (issue 46): a range bisected with train's reproducer is never
# eval's answer. `mode` is Mode.key ('' for eval), so every range stored before is eval's, as every run stored before is.
V25 = """
CREATE TABLE commit_ranges_v25 (
    config TEXT NOT NULL,
    mode TEXT NOT NULL DEFAULT '',
    signature TEXT NOT NULL,
    good_git TEXT NOT NULL,
    bad_git TEXT NOT NULL,
    status TEXT NOT NULL,
    commits TEXT NOT NULL,
    suspects TEXT NOT NULL,
    bisection TEXT,
    reason TEXT,
    wrong_by TEXT,
    wrong_at TEXT,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (config, mode, signature, good_git, bad_git)
);
INSERT INTO commit_ranges_v25 (config, mode, signature, good_git, bad_git, status, commits, suspects, bisection, reason,
    wrong_by, wrong_at, recorded_at)
    SELECT config, '', signature, good_git, bad_git, status, commits, suspects, bisection, reason, wrong_by, wrong_at,
    recorded_at FROM commit_ranges;
DROP TABLE commit_ranges;
ALTER TABLE commit_ranges_v25 RENAME TO commit_ranges;
"""

# v25 -> v26: `zoo lock --reverify` and `--modes-probe` keep each answered entry as its worker finishes, as `zoo lock`
# keeps its own (zoo_lock_entries), so an interrupted run resumes with what is left. Apart from those: a job's entry is
# another job's to redo, and it is reused only while the lock still holds the entry it began from (`source`).
V26 = """
CREATE TABLE zoo_probe_entries (
    job TEXT NOT NULL,                     -- the lock job that answered it (harness.discovery.locker)
    transformers TEXT NOT NULL,            -- the transformers version the lock is for
    model TEXT NOT NULL,
    source TEXT NOT NULL,                  -- the hash of the lock entry the job began from
    entry TEXT NOT NULL,                   -- JSON: the answered lock entry, sealed (harness/zoo/lock.py)
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (job, transformers, model)
);
"""

MIGRATIONS: list[str] = [V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16, V17, V18, V19,
                         V20, V21, V22, V23, V24, V25, V26]
SCHEMA_VERSION = len(MIGRATIONS)
