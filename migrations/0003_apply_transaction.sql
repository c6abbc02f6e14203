-- One store transaction (object creates and updates, device-ledger rows, released claims) in one
-- call: the scheduler's bindings then cost one round trip instead of one per statement plus a
-- savepoint. The whole call runs in a subtransaction: a logical failure undoes only its own
-- parts and is reported as (ord, code) instead of an error, so the surrounding group commit
-- goes on. Writes take revisions in array order and log each change, exactly as the
-- single-statement writes in src/store/pg/queries.h do.
--
-- Result: one row per write (ord = its 1-based position, rv = its new revision), or on failure
-- a single row with ord = the failing write or ledger row and code:
--   exists (create of an existing key), missing (update of a missing key),
--   conflict (update with a stale revision), taken (a device already held exclusively).
CREATE FUNCTION qm_apply_transaction(
  w_create boolean[], w_resource text[], w_namespace text[], w_name text[], w_uid text[],
  w_generation bigint[], w_creation bigint[], w_deletion bigint[], w_labels text[],
  w_meta text[], w_fields text[], w_digest text[], w_body text[], w_expected bigint[],
  d_driver text[], d_pool text[], d_device text[], d_share_id text[], d_claim_uid text[],
  d_admin_access boolean[], d_consumed text[], release_uids text[])
RETURNS TABLE (ord integer, rv bigint, code text)
LANGUAGE plpgsql AS $$
DECLARE
  i integer;
  got bigint;
  revisions bigint[] := '{}';
  failed_ord integer;
  failed_code text;
BEGIN
  BEGIN
    IF coalesce(array_length(release_uids, 1), 0) > 0 THEN
      DELETE FROM device_allocations WHERE claim_uid = ANY (release_uids);
    END IF;
    FOR i IN 1 .. coalesce(array_length(w_create, 1), 0) LOOP
      got := NULL;
      IF w_create[i] THEN
        INSERT INTO objects (resource, namespace, name, uid, resource_version, generation,
                             creation_timestamp, deletion_timestamp, labels, meta, fields,
                             spec_digest, body)
        VALUES (w_resource[i], w_namespace[i], w_name[i], w_uid[i],
                nextval('resource_version_seq'), w_generation[i], to_timestamp(w_creation[i]),
                to_timestamp(NULLIF(w_deletion[i], 0)), w_labels[i]::jsonb, w_meta[i]::jsonb,
                w_fields[i]::jsonb, w_digest[i], w_body[i]::jsonb)
        ON CONFLICT (resource, namespace, name) DO NOTHING
        RETURNING resource_version INTO got;
        IF got IS NULL THEN
          RAISE EXCEPTION USING ERRCODE = 'QM001', MESSAGE = i::text;
        END IF;
      ELSE
        UPDATE objects SET uid = w_uid[i], resource_version = nextval('resource_version_seq'),
                           generation = w_generation[i],
                           creation_timestamp = to_timestamp(w_creation[i]),
                           deletion_timestamp = to_timestamp(NULLIF(w_deletion[i], 0)),
                           labels = w_labels[i]::jsonb, meta = w_meta[i]::jsonb,
                           fields = w_fields[i]::jsonb, spec_digest = w_digest[i],
                           body = w_body[i]::jsonb
        WHERE resource = w_resource[i] AND namespace = w_namespace[i] AND name = w_name[i]
          AND (w_expected[i] = 0 OR resource_version = w_expected[i])
        RETURNING resource_version INTO got;
        IF got IS NULL THEN
          IF EXISTS (SELECT 1 FROM objects WHERE resource = w_resource[i]
                     AND namespace = w_namespace[i] AND name = w_name[i]) THEN
            RAISE EXCEPTION USING ERRCODE = 'QM003', MESSAGE = i::text;
          END IF;
          RAISE EXCEPTION USING ERRCODE = 'QM002', MESSAGE = i::text;
        END IF;
      END IF;
      INSERT INTO change_log (rv, event_type, resource, namespace, name, uid, generation,
                              creation_timestamp, deletion_timestamp, labels, meta, fields,
                              spec_digest, body)
      VALUES (got, CASE WHEN w_create[i] THEN 'ADDED' ELSE 'MODIFIED' END, w_resource[i],
              w_namespace[i], w_name[i], w_uid[i], w_generation[i], to_timestamp(w_creation[i]),
              to_timestamp(NULLIF(w_deletion[i], 0)), w_labels[i]::json, w_meta[i]::json,
              w_fields[i]::json, w_digest[i], w_body[i]::json);
      revisions := revisions || got;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(d_driver, 1), 0) LOOP
      got := NULL;
      INSERT INTO device_allocations
        (driver, pool, device, share_id, claim_uid, admin_access, consumed_capacity)
      VALUES (d_driver[i], d_pool[i], d_device[i], d_share_id[i], d_claim_uid[i],
              d_admin_access[i], d_consumed[i]::jsonb)
      ON CONFLICT DO NOTHING
      RETURNING 1 INTO got;
      IF got IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QM004', MESSAGE = i::text;
      END IF;
    END LOOP;
  EXCEPTION WHEN SQLSTATE 'QM001' OR SQLSTATE 'QM002' OR SQLSTATE 'QM003'
                 OR SQLSTATE 'QM004' THEN
    GET STACKED DIAGNOSTICS failed_code = RETURNED_SQLSTATE;
    failed_ord := SQLERRM::integer;
    ord := failed_ord;
    rv := NULL;
    code := CASE failed_code WHEN 'QM001' THEN 'exists' WHEN 'QM002' THEN 'missing'
                             WHEN 'QM003' THEN 'conflict' ELSE 'taken' END;
    RETURN NEXT;
    RETURN;
  END;
  FOR i IN 1 .. coalesce(array_length(revisions, 1), 0) LOOP
    ord := i;
    rv := revisions[i];
    code := NULL;
    RETURN NEXT;
  END LOOP;
END
$$;
