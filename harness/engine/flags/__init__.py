"""Every flag: the config space of a build (`space`), named flag sets (`sets`, over exclusions.toml), the keys a
compile reads (`reads`, in the worker) and read-set pruning with its audit (`pruning`)."""
