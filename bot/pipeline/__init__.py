"""The nightly pipeline and its steps: provide, sweep, diff, confirm, ranges, verify, publish, report."""
