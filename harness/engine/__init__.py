"""The sweep engine: configs and their check, the counting backend, isolated workers, environments, script runs."""
