-- One statement per group commit. The writer sent each batch as BEGIN, the write lock, one
-- qm_apply_batch call per run of writes without deletes, every delete on its own (a transaction
-- with a delete also under a savepoint of its own, its released claims one statement each), the
-- audit rows, the notification and COMMIT: about a dozen round trips, each a wake-up of this
-- backend and of the writer, which under load cost the writer more time than PostgreSQL's work.
-- qm_write_batch does all of it in one call, in the same order, with the same outcome per write:
--  * writes are creates ('c'), updates ('u') and deletes ('d': resource, namespace, name and the
--    expected revision count; the other columns are ignored). A delete logs the object's last
--    state as DELETED at a new revision and returns it (o_* columns; NULL for other writes);
--  * the write lock is taken first, so revisions follow commit order across replicas;
--  * audit rows (a_*: one per row, a_group its write group) are inserted for the groups that
--    succeeded;
--  * qm_changes is notified of the newest revision written.
-- A group's failure codes and the order of its parts are those of qm_apply_batch
-- (migrations/0010), which this replaces.
DROP FUNCTION qm_apply_batch(integer, integer[], boolean[], text[], text[], text[], text[],
                             bigint[], bigint[], bigint[], text[], text[], text[], text[],
                             text[], bigint[], integer[], text[], text[], text[], text[],
                             text[], boolean[], text[], text[], integer[], text[], integer[],
                             text[], text[], bigint[], integer[], text[], bigint[], bigint[]);

CREATE FUNCTION qm_write_batch(
  groups integer,
  w_group integer[], w_op text[], w_resource text[], w_namespace text[], w_name text[],
  w_uid text[], w_generation bigint[], w_creation bigint[], w_deletion bigint[],
  w_labels text[], w_meta text[], w_fields text[], w_digest text[], w_body text[],
  w_expected bigint[],
  d_group integer[], d_driver text[], d_pool text[], d_device text[], d_share_id text[],
  d_claim_uid text[], d_admin_access boolean[], d_consumed text[], d_charges text[],
  r_group integer[], r_uid text[],
  q_group integer[], q_namespace text[], q_key text[], q_hard bigint[],
  s_group integer[], s_namespace text[], s_count bigint[], s_newest bigint[],
  a_group integer[], a_at bigint[], a_request text[], a_user text[], a_groups text[],
  a_verb text[], a_api_group text[], a_resource text[], a_subresource text[],
  a_namespace text[], a_name text[], a_code integer[], a_source text[], a_user_agent text[])
RETURNS TABLE (grp integer, ord integer, rv bigint, code text, o_uid text, o_generation bigint,
               o_creation bigint, o_deletion bigint, o_labels text, o_meta text, o_fields text,
               o_digest text, o_body text)
LANGUAGE plpgsql AS $$
DECLARE
  g integer;
  i integer := 1;  -- next write
  j integer := 1;  -- next ledger row
  k integer := 1;  -- next released claim
  q integer := 1;  -- next quota check
  s integer := 1;  -- next quota-set check
  wn integer := coalesce(array_length(w_group, 1), 0);
  dn integer := coalesce(array_length(d_group, 1), 0);
  rn integer := coalesce(array_length(r_group, 1), 0);
  qn integer := coalesce(array_length(q_group, 1), 0);
  sn integer := coalesce(array_length(s_group, 1), 0);
  first_write integer;
  first_row integer;
  first_check integer;
  first_set integer;
  refused text;
  got bigint;
  gone change_log;  -- a deleted object's change-log row
  newest bigint := 0;
  succeeded boolean[] := array_fill(false, ARRAY[greatest(groups, 1)]);
  revisions bigint[];
  deleted change_log[];  -- per write of the group: its change-log row if a delete, else NULL
  failed_code text;
  failed_ord integer;
BEGIN
  PERFORM pg_advisory_xact_lock(7236011);
  FOR g IN 1 .. groups LOOP
    first_write := i;
    first_row := j;
    first_check := q;
    first_set := s;
    revisions := '{}';
    deleted := '{}';
    failed_code := NULL;
    BEGIN
      WHILE k <= rn AND r_group[k] = g LOOP
        PERFORM qm_release_claim(r_uid[k]);
        k := k + 1;
      END LOOP;
      -- Before the group's writes: the namespace's ResourceQuotas are still the ones its quota
      -- checks were computed from (as many, the newest at the same revision).
      WHILE s <= sn AND s_group[s] = g LOOP
        IF (SELECT count(*) <> s_count[s] OR coalesce(max(resource_version), 0) <> s_newest[s]
            FROM objects WHERE resource = 'resourcequotas' AND namespace = s_namespace[s]) THEN
          RAISE EXCEPTION USING ERRCODE = 'QM007', MESSAGE = (s - first_set + 1)::text;
        END IF;
        s := s + 1;
      END LOOP;
      WHILE i <= wn AND w_group[i] = g LOOP
        got := NULL;
        IF w_op[i] = 'c' THEN
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
        ELSIF w_op[i] = 'u' THEN
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
        ELSE
          DELETE FROM objects
          WHERE resource = w_resource[i] AND namespace = w_namespace[i] AND name = w_name[i]
            AND (w_expected[i] = 0 OR resource_version = w_expected[i])
          RETURNING nextval('resource_version_seq'), 'DELETED', resource, namespace, name, uid,
                    generation, creation_timestamp, deletion_timestamp, labels::text,
                    meta::text, fields::text, spec_digest, body::text, now()
          INTO gone;
          got := gone.rv;
        END IF;
        IF got IS NULL THEN
          IF EXISTS (SELECT 1 FROM objects WHERE resource = w_resource[i]
                     AND namespace = w_namespace[i] AND name = w_name[i]) THEN
            RAISE EXCEPTION USING ERRCODE = 'QM003', MESSAGE = (i - first_write + 1)::text;
          END IF;
          RAISE EXCEPTION USING ERRCODE = 'QM002', MESSAGE = (i - first_write + 1)::text;
        END IF;
        IF w_op[i] = 'd' THEN
          INSERT INTO change_log VALUES (gone.*);
          deleted := deleted || gone;
        ELSE
          INSERT INTO change_log (rv, event_type, resource, namespace, name, uid, generation,
                                  creation_timestamp, deletion_timestamp, labels, meta, fields,
                                  spec_digest, body)
          VALUES (got, CASE WHEN w_op[i] = 'c' THEN 'ADDED' ELSE 'MODIFIED' END, w_resource[i],
                  w_namespace[i], w_name[i], w_uid[i], w_generation[i],
                  to_timestamp(w_creation[i]), to_timestamp(NULLIF(w_deletion[i], 0)),
                  w_labels[i], w_meta[i], w_fields[i], w_digest[i], w_body[i]);
          deleted := deleted || NULL::change_log;
        END IF;
        revisions := revisions || got;
        i := i + 1;
      END LOOP;
      WHILE j <= dn AND d_group[j] = g LOOP
        refused := qm_insert_device_claim(d_driver[j], d_pool[j], d_device[j], d_share_id[j],
                                          d_claim_uid[j], d_admin_access[j], d_consumed[j]::jsonb,
                                          d_charges[j]::jsonb);
        IF refused = 'taken' THEN
          RAISE EXCEPTION USING ERRCODE = 'QM004', MESSAGE = (j - first_row + 1)::text;
        ELSIF refused IS NOT NULL THEN
          RAISE EXCEPTION USING ERRCODE = 'QM005', MESSAGE = (j - first_row + 1)::text;
        END IF;
        j := j + 1;
      END LOOP;
      -- Quota checks see the group's own writes (the triggers on objects counted them).
      WHILE q <= qn AND q_group[q] = g LOOP
        IF coalesce((SELECT used FROM quota_usage
                     WHERE namespace = q_namespace[q] AND key = q_key[q]), 0) > q_hard[q] THEN
          RAISE EXCEPTION USING ERRCODE = 'QM006', MESSAGE = (q - first_check + 1)::text;
        END IF;
        q := q + 1;
      END LOOP;
    EXCEPTION WHEN SQLSTATE 'QM001' OR SQLSTATE 'QM002' OR SQLSTATE 'QM003'
                   OR SQLSTATE 'QM004' OR SQLSTATE 'QM005' OR SQLSTATE 'QM006'
                   OR SQLSTATE 'QM007' THEN
      GET STACKED DIAGNOSTICS failed_code = RETURNED_SQLSTATE;
      failed_ord := SQLERRM::integer;
    END;
    IF failed_code IS NULL THEN
      succeeded[g] := true;
      FOR n IN 1 .. coalesce(array_length(revisions, 1), 0) LOOP
        grp := g;
        ord := n;
        rv := revisions[n];
        newest := greatest(newest, rv);
        code := NULL;
        gone := deleted[n];
        IF gone.rv IS NULL THEN
          o_uid := NULL; o_generation := NULL; o_creation := NULL; o_deletion := NULL;
          o_labels := NULL; o_meta := NULL; o_fields := NULL; o_digest := NULL; o_body := NULL;
        ELSE
          o_uid := gone.uid;
          o_generation := gone.generation;
          o_creation := extract(epoch FROM gone.creation_timestamp)::bigint;
          o_deletion := coalesce(extract(epoch FROM gone.deletion_timestamp)::bigint, 0);
          o_labels := gone.labels;
          o_meta := gone.meta;
          o_fields := gone.fields;
          o_digest := gone.spec_digest;
          o_body := gone.body;
        END IF;
        RETURN NEXT;
      END LOOP;
    ELSE
      -- Skip what the failed group had left.
      WHILE k <= rn AND r_group[k] = g LOOP k := k + 1; END LOOP;
      WHILE i <= wn AND w_group[i] = g LOOP i := i + 1; END LOOP;
      WHILE j <= dn AND d_group[j] = g LOOP j := j + 1; END LOOP;
      WHILE q <= qn AND q_group[q] = g LOOP q := q + 1; END LOOP;
      WHILE s <= sn AND s_group[s] = g LOOP s := s + 1; END LOOP;
      grp := g;
      ord := failed_ord;
      rv := NULL;
      code := CASE failed_code WHEN 'QM001' THEN 'exists' WHEN 'QM002' THEN 'missing'
                               WHEN 'QM003' THEN 'conflict' WHEN 'QM004' THEN 'taken'
                               WHEN 'QM005' THEN 'overcommit' WHEN 'QM006' THEN 'quota'
                               ELSE 'quotas' END;
      o_uid := NULL; o_generation := NULL; o_creation := NULL; o_deletion := NULL;
      o_labels := NULL; o_meta := NULL; o_fields := NULL; o_digest := NULL; o_body := NULL;
      RETURN NEXT;
    END IF;
  END LOOP;
  IF coalesce(array_length(a_group, 1), 0) > 0 THEN
    INSERT INTO audit_events (at, request_id, username, groups, verb, api_group, resource,
                              subresource, namespace, name, code, source, user_agent)
    SELECT to_timestamp(x.t / 1e6), x.r, x.u, ARRAY(SELECT jsonb_array_elements_text(x.gr::jsonb)),
           x.v, x.ag, x.res, x.sub, x.ns, x.n, x.c, x.src, x.ua
    FROM unnest(a_group, a_at, a_request, a_user, a_groups, a_verb, a_api_group, a_resource,
                a_subresource, a_namespace, a_name, a_code, a_source, a_user_agent)
         AS x(gi, t, r, u, gr, v, ag, res, sub, ns, n, c, src, ua)
    WHERE succeeded[x.gi];
  END IF;
  IF newest > 0 THEN
    PERFORM pg_notify('qm_changes', newest::text);
  END IF;
END
$$;
