"""Zoo discovery, used only by `flagsweep zoo lock` and `zoo check`: enumerate, probe, repair, shrink, lock."""
