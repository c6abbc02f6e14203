-- Many independent writes and transactions (object creates and updates, device-ledger rows,
-- released claims) in one call, so that a group commit costs one round trip instead of one per
-- statement plus a savepoint per transaction. Each group (one single write, or one store
-- transaction) runs in a subtransaction of its own: a logical failure undoes only that group's
-- parts and is reported as a row instead of an error, and the other groups go on. Writes take
-- revisions in array order and log each change, exactly as the single-statement writes in
-- src/store/pg/queries.h do.
--
-- The arrays are parallel and sorted by group (1..groups): w_* one element per object write,
-- d_* per ledger row, r_* per released claim uid. Result rows, in group order: for a group that
-- committed, one row per write (ord = its 1-based position in the group, rv = its revision); for
-- a group that failed, one row with ord = the failing write or ledger row and code:
--   exists (create of an existing key), missing (update of a missing key),
--   conflict (update with a stale revision), taken (a device already held exclusively).
CREATE FUNCTION qm_apply_batch(
  groups integer,
  w_group integer[], w_create boolean[], w_resource text[], w_namespace text[], w_name text[],
  w_uid text[], w_generation bigint[], w_creation bigint[], w_deletion bigint[],
  w_labels text[], w_meta text[], w_fields text[], w_digest text[], w_body text[],
  w_expected bigint[],
  d_group integer[], d_driver text[], d_pool text[], d_device text[], d_share_id text[],
  d_claim_uid text[], d_admin_access boolean[], d_consumed text[],
  r_group integer[], r_uid text[])
RETURNS TABLE (grp integer, ord integer, rv bigint, code text)
LANGUAGE plpgsql AS $$
DECLARE
  g integer;
  i integer := 1;  -- next write
  j integer := 1;  -- next ledger row
  k integer := 1;  -- next released claim
  wn integer := coalesce(array_length(w_group, 1), 0);
  dn integer := coalesce(array_length(d_group, 1), 0);
  rn integer := coalesce(array_length(r_group, 1), 0);
  first_write integer;
  first_row integer;
  got bigint;
  revisions bigint[];
  failed_code text;
  failed_ord integer;
BEGIN
  FOR g IN 1 .. groups LOOP
    first_write := i;
    first_row := j;
    revisions := '{}';
    failed_code := NULL;
    BEGIN
      WHILE k <= rn AND r_group[k] = g LOOP
        DELETE FROM device_allocations WHERE claim_uid = r_uid[k];
        k := k + 1;
      END LOOP;
      WHILE i <= wn AND w_group[i] = g LOOP
        got := NULL;
        IF w_create[i] THEN
          INSERT INTO objects (resource, namespace, name, uid, resource_version, generation,
                               creation_timestamp, deletion_timestamp, labels, meta, fields,
                               spec_digest, body)
          VALUES (w_resource[i], w_namespace[i], w_name[i], w_uid[i],
                  nextval('resource_version_seq'), w_generation[i],
                  to_timestamp(w_creation[i]), to_timestamp(NULLIF(w_deletion[i], 0)),
                  w_labels[i]::jsonb, w_meta[i]::jsonb, w_fields[i]::jsonb, w_digest[i],
                  w_body[i]::jsonb)
          ON CONFLICT (resource, namespace, name) DO NOTHING
          RETURNING resource_version INTO got;
          IF got IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QM001', MESSAGE = (i - first_write + 1)::text;
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
              RAISE EXCEPTION USING ERRCODE = 'QM003', MESSAGE = (i - first_write + 1)::text;
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'QM002', MESSAGE = (i - first_write + 1)::text;
          END IF;
        END IF;
        INSERT INTO change_log (rv, event_type, resource, namespace, name, uid, generation,
                                creation_timestamp, deletion_timestamp, labels, meta, fields,
                                spec_digest, body)
        VALUES (got, CASE WHEN w_create[i] THEN 'ADDED' ELSE 'MODIFIED' END, w_resource[i],
                w_namespace[i], w_name[i], w_uid[i], w_generation[i],
                to_timestamp(w_creation[i]), to_timestamp(NULLIF(w_deletion[i], 0)),
                w_labels[i]::json, w_meta[i]::json, w_fields[i]::json, w_digest[i],
                w_body[i]::json);
        revisions := revisions || got;
        i := i + 1;
      END LOOP;
      WHILE j <= dn AND d_group[j] = g LOOP
        got := NULL;
        INSERT INTO device_allocations
          (driver, pool, device, share_id, claim_uid, admin_access, consumed_capacity)
        VALUES (d_driver[j], d_pool[j], d_device[j], d_share_id[j], d_claim_uid[j],
                d_admin_access[j], d_consumed[j]::jsonb)
        ON CONFLICT DO NOTHING
        RETURNING 1 INTO got;
        IF got IS NULL THEN
          RAISE EXCEPTION USING ERRCODE = 'QM004', MESSAGE = (j - first_row + 1)::text;
        END IF;
        j := j + 1;
      END LOOP;
    EXCEPTION WHEN SQLSTATE 'QM001' OR SQLSTATE 'QM002' OR SQLSTATE 'QM003'
                   OR SQLSTATE 'QM004' THEN
      GET STACKED DIAGNOSTICS failed_code = RETURNED_SQLSTATE;
      failed_ord := SQLERRM::integer;
    END;
    IF failed_code IS NULL THEN
      FOR n IN 1 .. coalesce(array_length(revisions, 1), 0) LOOP
        grp := g;
        ord := n;
        rv := revisions[n];
        code := NULL;
        RETURN NEXT;
      END LOOP;
    ELSE
      -- Skip what the failed group had left.
      WHILE k <= rn AND r_group[k] = g LOOP k := k + 1; END LOOP;
      WHILE i <= wn AND w_group[i] = g LOOP i := i + 1; END LOOP;
      WHILE j <= dn AND d_group[j] = g LOOP j := j + 1; END LOOP;
      grp := g;
      ord := failed_ord;
      rv := NULL;
      code := CASE failed_code WHEN 'QM001' THEN 'exists' WHEN 'QM002' THEN 'missing'
                               WHEN 'QM003' THEN 'conflict' ELSE 'taken' END;
      RETURN NEXT;
    END IF;
  END LOOP;
END
$$;
