"""The issues of a run: from its view, timeline and verdicts to GitHub actions with rendered text (bot.issues.plan)."""
