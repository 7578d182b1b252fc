"""The long-running bot: scheduler, webhook server, job queue."""
