"""The command line: one module per area of `flagsweep`."""
