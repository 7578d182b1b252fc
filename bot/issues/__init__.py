"""The issue planner: from a run view and its verdicts to GitHub actions with rendered text."""
