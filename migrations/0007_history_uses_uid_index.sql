-- The allocation history's triggers (migrations/0006) look up each ledger row's claim by uid.
-- device_allocations.claim_uid is COLLATE "C" and objects.uid has the database's default
-- collation: compared as they are, the comparison takes the "C" collation and the objects_uid
-- index (default collation) cannot serve it, so every ledger insert and delete scanned the whole
-- objects table (about 3 ms at 20,000 objects, growing with the store; it cut scheduling from
-- ~2,000 to ~400 pods/s). Uids are ASCII, so comparing them in the default collation finds the
-- same rows, through the index.
CREATE OR REPLACE FUNCTION qm_record_allocations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO allocation_history
    (driver, pool, device, share_id, claim_uid, claim_namespace, admin_access, delta)
  SELECT n.driver, n.pool, n.device, n.share_id, n.claim_uid, COALESCE(o.namespace, ''),
         n.admin_access, 1
  FROM qm_new_allocations n
  LEFT JOIN objects o ON o.uid = n.claim_uid COLLATE "default";
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION qm_record_releases() RETURNS trigger LANGUAGE plpgsql AS $$
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
  FROM qm_old_allocations d
  LEFT JOIN objects o ON o.uid = d.claim_uid COLLATE "default";
  RETURN NULL;
END $$;
