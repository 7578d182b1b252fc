"""The run as publishing sees it: RunView, read once from the store, and the stored diff."""
