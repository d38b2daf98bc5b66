"""The transaction (`transaction.Transaction`): table lock, timeline repair, run tokens,
instants, heartbeats, conflict checks, commit and abort. Only this package creates or
completes timeline files; writes and table services run through it."""
