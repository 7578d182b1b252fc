# The two commands of the README quick start. Both bootstrap .venv first.
.PHONY: run test bootstrap

bootstrap:
	@scripts/bootstrap.sh

run: bootstrap
	.venv/bin/flagsweep nightly --dry-run --torch current

test: bootstrap
	.venv/bin/python -m pytest -q
