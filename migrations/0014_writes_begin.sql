-- The writer's first statement in each batch's transaction: it takes the write lock (the one
-- qm_write_batch takes, held until the transaction ends) and returns the newest revision in the
-- change log, read after the lock was granted, so every batch that committed before is counted.
-- The batch's own revisions are drawn after it, under the same lock: when the writer's batch
-- commits, no change lies between that revision and the batch's own. The watch hub then takes
-- the batch's changes from the writer instead of asking the change log for them (PgStore's own
-- spans). A separate function, not a part of qm_write_batch: in PostgreSQL's read committed mode
-- a statement's snapshot is taken before it runs, and a function's statements each take a new
-- one, so the newest revision must be read by a statement that starts after the lock is held.
CREATE FUNCTION qm_begin_writes() RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(7236011);
  RETURN (SELECT COALESCE(MAX(rv), 0) FROM change_log);
END
$$;
