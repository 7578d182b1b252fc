"""Regression ranges: the last good and first bad nightly of a new crash or a fix, and the one bisection behind them."""
