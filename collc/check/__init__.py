"""The checker of runtime files: static rules and executor simulation (reads a Program or a plan; imports no backend)."""
