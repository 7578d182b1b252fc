# The two commands of the README quick start. Both bootstrap .venv first.
.PHONY: run test bootstrap cross-version bump-transformers

bootstrap:
	@scripts/bootstrap.sh

# The quick start's own settings (README "Quick start": what they trade); SETTINGS=FILE for others.
SETTINGS ?= quickstart.toml

run: bootstrap
	.venv/bin/flagsweep --settings $(SETTINGS) nightly --dry-run --torch current

test: bootstrap
	.venv/bin/python -m pytest -q -n 2 --dist loadfile

# Not a test: the nightly under the bot's torch and under torch 2.14.1 (installed into
# /tmp/torch214 when missing, ~4 GB), diffed and published in dry run. MODELS=N for a subset.
cross-version: bootstrap
	.venv/bin/python bench/cross_version.py $(if $(MODELS),--models $(MODELS))

# The transformers bump (README "Bumping transformers"): install VERSION into .venv (pinned), re-lock the
# corpus, print the lock diff and `zoo check` the changed classes. WORKERS=N for the lock and the check.
bump-transformers: bootstrap
	scripts/bump_transformers.sh $(VERSION)
