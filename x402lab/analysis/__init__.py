"""Cost analysis: spend tables and plots from the ledger."""
