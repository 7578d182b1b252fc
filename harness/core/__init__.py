"""The domain, stdlib only: outcomes, effects, signatures, graph breaks, populations, the diff, verified fixes."""
