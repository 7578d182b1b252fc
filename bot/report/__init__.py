"""The HTML/Markdown report of one run."""
