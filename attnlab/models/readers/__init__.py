"""One module per reader; each registers itself (attnlab.models.registry.register)."""
