"""Publishing: plan -> outbox -> GitHub (PyGithub) or the dry-run twin that writes files."""
