-- The allocation history (docs/ui.md, UtilizationHistoryReview): one row per change of the
-- device-allocation ledger (migrations/0002), +1 for a row inserted and -1 for a row deleted,
-- written by statement triggers in the transaction that changes the ledger. A binding or a
-- release and its history commit together or not at all, whichever path (single commits,
-- qm_apply_batch) or replica wrote them, and nothing is kept in memory. Rows carry the claim's
-- namespace as it was when they were written (a released claim may be gone by the time the
-- history is read). Times are clock_timestamp(): a delete is always recorded after the insert
-- it undoes, even when the deleting transaction started first.
CREATE TABLE allocation_history (
  id               bigserial   PRIMARY KEY,
  at               timestamptz NOT NULL DEFAULT clock_timestamp(),
  driver           text COLLATE "C" NOT NULL,
  pool             text COLLATE "C" NOT NULL,
  device           text COLLATE "C" NOT NULL,
  share_id         text COLLATE "C" NOT NULL,
  claim_uid        text COLLATE "C" NOT NULL,
  claim_namespace  text COLLATE "C" NOT NULL,
  admin_access     boolean NOT NULL,
  delta            smallint NOT NULL CHECK (delta IN (1, -1))
);

CREATE INDEX allocation_history_at ON allocation_history (at);
CREATE INDEX allocation_history_claim ON allocation_history (claim_uid, id);

CREATE FUNCTION qm_record_allocations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO allocation_history
    (driver, pool, device, share_id, claim_uid, claim_namespace, admin_access, delta)
  SELECT n.driver, n.pool, n.device, n.share_id, n.claim_uid, COALESCE(o.namespace, ''),
         n.admin_access, 1
  FROM qm_new_allocations n LEFT JOIN objects o ON o.uid = n.claim_uid;
  RETURN NULL;
END $$;

CREATE FUNCTION qm_record_releases() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- The claim may have been deleted earlier in the same transaction: then its namespace is
  -- the one recorded when the row was inserted.
  INSERT INTO allocation_history
    (driver, pool, device, share_id, claim_uid, claim_namespace, admin_access, delta)
  SELECT d.driver, d.pool, d.device, d.share_id, d.claim_uid,
         COALESCE(o.namespace,
                  (SELECT h.claim_namespace FROM allocation_history h
                   WHERE h.claim_uid = d.claim_uid ORDER BY h.id DESC LIMIT 1),
                  ''),
         d.admin_access, -1
  FROM qm_old_allocations d LEFT JOIN objects o ON o.uid = d.claim_uid;
  RETURN NULL;
END $$;

CREATE TRIGGER device_allocations_history_insert AFTER INSERT ON device_allocations
  REFERENCING NEW TABLE AS qm_new_allocations
  FOR EACH STATEMENT EXECUTE FUNCTION qm_record_allocations();

CREATE TRIGGER device_allocations_history_delete AFTER DELETE ON device_allocations
  REFERENCING OLD TABLE AS qm_old_allocations
  FOR EACH STATEMENT EXECUTE FUNCTION qm_record_releases();
