"""Table services. Each is plan -> execute -> commit, the plan persisted on the timeline
before any data file changes: compaction, clean, archive, rollback, savepoint and restore."""
