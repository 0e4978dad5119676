"""Runtime adapters: one process driver and attachment delivery adapter per agent CLI."""
