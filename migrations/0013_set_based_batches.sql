-- qm_write_batch (migrations/0011) ran two statements per write (the object's insert, update or
-- delete and its change-log row) and a ledger function call per ledger row, each statement a
-- fresh executor start inside PostgreSQL: under the scheduler benchmark that per-statement work
-- was most of PostgreSQL's CPU time, and PostgreSQL's single writer backend bounds throughput.
--
-- A batch of six writes or more in which every group commits now takes a set-based path: one insert of all creates,
-- one update of all updates, one delete of all deletes, one insert of their change-log rows, one
-- insert of the ledger rows that take no capacity or counters (the others still go through
-- qm_insert_device_claim, one by one). It runs under a savepoint; if anything in it fails (a
-- create that exists, a stale or missing update or delete, a device taken, a quota or quota-set
-- check, any error), it is rolled back and the batch runs as before, write by write
-- (qm_write_batch_each, the function of 0011 renamed), which gives each group its own outcome.
-- The set-based path commits only what the write-by-write one would have committed:
--  * revisions are drawn in write order before any write, so they follow the queue as before
--    (a rolled-back attempt leaves a gap in the sequence, as a failed group always did);
--  * what frees devices (releases, deleted claims) runs after every ledger insert, and quota
--    checks run before the deletes, after every create and update: a device freed or a quota
--    made room for later in the queue is never taken earlier in it (the attempt fails and the
--    write-by-write path decides);
--  * a batch of fewer than six writes goes write by write at once: the set-based statements
--    cost more per call than they save on so few rows (measured with pod creates and deletes:
--    one write per batch 1.1-1.4x slower set-based, four about even, eight 1.4-2x faster, 64
--    2-3x faster);
--  * a batch goes write by write at once when the order of its parts matters otherwise: it
--    writes one object twice, it writes a ResourceQuota (whose first insert counts the
--    namespace's usage from the objects table), or it releases a claim it also gives ledger
--    rows; a batch that deletes a claim it gives ledger rows fails its attempt.
--
-- Both paths run with plan_cache_mode = force_generic_plan (a SET of qm_write_batch, so the
-- write-by-write function, the ledger functions and the triggers get it too): PostgreSQL would
-- otherwise plan most of their statements anew on every call, because the custom plan for the
-- batch's arrays always looks cheaper than the generic one; the plans are the same index
-- lookups (a one-write batch took about 0.5 ms, 0.3 ms with generic plans).
ALTER FUNCTION qm_write_batch(integer, integer[], text[], text[], text[], text[], text[],
                              bigint[], bigint[], bigint[], text[], text[], text[], text[],
                              text[], bigint[], integer[], text[], text[], text[], text[],
                              text[], boolean[], text[], text[], integer[], text[], integer[],
                              text[], text[], bigint[], integer[], text[], bigint[], bigint[],
                              integer[], bigint[], text[], text[], text[], text[], text[],
                              text[], text[], text[], text[], integer[], text[], text[])
  RENAME TO qm_write_batch_each;

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
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  wn integer := coalesce(array_length(w_group, 1), 0);
  dn integer := coalesce(array_length(d_group, 1), 0);
  rn integer := coalesce(array_length(r_group, 1), 0);
  qn integer := coalesce(array_length(q_group, 1), 0);
  sn integer := coalesce(array_length(s_group, 1), 0);
  nc integer := coalesce(array_length(array_positions(w_op, 'c'), 1), 0);
  nu integer := coalesce(array_length(array_positions(w_op, 'u'), 1), 0);
  nd integer := coalesce(array_length(array_positions(w_op, 'd'), 1), 0);
  rvs bigint[];
  done bigint;
  charged integer[];  -- the ledger rows that take capacity or counters
  j integer;
  refused text;
  gone_at integer[];      -- the deletes' write indexes
  gone_rows change_log[]; -- and their change-log rows (the objects' last states)
  set_based_from constant integer := 6;
  set_based boolean := false;
BEGIN
  PERFORM pg_advisory_xact_lock(7236011);
  IF wn >= set_based_from AND NOT ('resourcequotas' = ANY (w_resource))
     AND NOT (rn > 0 AND dn > 0 AND r_uid && d_claim_uid) THEN
    set_based := NOT EXISTS (SELECT 1 FROM unnest(w_resource, w_namespace, w_name) AS k(r, ns, n)
                             GROUP BY k.r, k.ns, k.n HAVING count(*) > 1);
  END IF;
  IF set_based THEN
    BEGIN
      SELECT array_agg(v) INTO rvs
      FROM (SELECT nextval('resource_version_seq') AS v FROM generate_series(1, wn)) AS s;
      IF sn > 0 THEN
        IF EXISTS (SELECT 1 FROM unnest(s_namespace, s_count, s_newest) AS c(ns, n, newest)
                   WHERE (SELECT count(*) <> c.n OR coalesce(max(o.resource_version), 0) <> c.newest
                          FROM objects o
                          WHERE o.resource = 'resourcequotas' AND o.namespace = c.ns)) THEN
          RAISE EXCEPTION USING ERRCODE = 'QM007';
        END IF;
      END IF;
      IF nc > 0 THEN
        INSERT INTO objects (resource, namespace, name, uid, resource_version, generation,
                             creation_timestamp, deletion_timestamp, labels, meta, fields,
                             spec_digest, body)
        SELECT w.r, w.ns, w.n, w.uid, rvs[w.i::integer], w.gen, to_timestamp(w.cr),
               to_timestamp(NULLIF(w.del, 0)), w.l::jsonb, w.m::jsonb, w.f::jsonb, w.dg, w.b::jsonb
        FROM unnest(w_op, w_resource, w_namespace, w_name, w_uid, w_generation, w_creation,
                    w_deletion, w_labels, w_meta, w_fields, w_digest, w_body)
             WITH ORDINALITY AS w(op, r, ns, n, uid, gen, cr, del, l, m, f, dg, b, i)
        WHERE w.op = 'c'
        ORDER BY w.i;
      END IF;
      IF nu > 0 THEN
        UPDATE objects o
        SET uid = w.uid, resource_version = rvs[w.i::integer], generation = w.gen,
            creation_timestamp = to_timestamp(w.cr),
            deletion_timestamp = to_timestamp(NULLIF(w.del, 0)), labels = w.l::jsonb,
            meta = w.m::jsonb, fields = w.f::jsonb, spec_digest = w.dg, body = w.b::jsonb
        FROM unnest(w_op, w_resource, w_namespace, w_name, w_uid, w_generation, w_creation,
                    w_deletion, w_labels, w_meta, w_fields, w_digest, w_body, w_expected)
             WITH ORDINALITY AS w(op, r, ns, n, uid, gen, cr, del, l, m, f, dg, b, exp, i)
        WHERE w.op = 'u' AND o.resource = w.r AND o.namespace = w.ns AND o.name = w.n
          AND (w.exp = 0 OR o.resource_version = w.exp);
        GET DIAGNOSTICS done = ROW_COUNT;
        IF done <> nu THEN
          RAISE EXCEPTION USING ERRCODE = 'QM003';
        END IF;
      END IF;
      IF nc + nu > 0 THEN
        INSERT INTO change_log (rv, event_type, resource, namespace, name, uid, generation,
                                creation_timestamp, deletion_timestamp, labels, meta, fields,
                                spec_digest, body)
        SELECT rvs[w.i::integer], CASE WHEN w.op = 'c' THEN 'ADDED' ELSE 'MODIFIED' END, w.r, w.ns, w.n,
               w.uid, w.gen, to_timestamp(w.cr), to_timestamp(NULLIF(w.del, 0)), w.l::json,
               w.m::json, w.f::json, w.dg, w.b::json
        FROM unnest(w_op, w_resource, w_namespace, w_name, w_uid, w_generation, w_creation,
                    w_deletion, w_labels, w_meta, w_fields, w_digest, w_body)
             WITH ORDINALITY AS w(op, r, ns, n, uid, gen, cr, del, l, m, f, dg, b, i)
        WHERE w.op <> 'd'
        ORDER BY w.i;
      END IF;
      IF dn > 0 THEN
        -- Rows that take nothing (exclusive devices, admin access) at once, as
        -- qm_insert_device_claim would store them; a device already taken fails the attempt.
        WITH rows AS (
          SELECT d.*, d.ch::jsonb AS charges
          FROM unnest(d_driver, d_pool, d_device, d_share_id, d_claim_uid, d_admin_access,
                      d_consumed, d_charges) WITH ORDINALITY
               AS d(driver, pool, device, share_id, claim_uid, admin, consumed, ch, i)
        ), sorted AS (
          SELECT r.*, r.admin OR (
                   coalesce(jsonb_array_length(CASE WHEN jsonb_typeof(r.charges -> 'capacity') = 'array'
                                                    THEN r.charges -> 'capacity' END), 0) = 0
                   AND coalesce(jsonb_array_length(CASE WHEN jsonb_typeof(r.charges -> 'counters') = 'array'
                                                        THEN r.charges -> 'counters' END), 0) = 0)
                 AS plain
          FROM rows r
        ), inserted AS (
          INSERT INTO device_allocations
            (driver, pool, device, share_id, claim_uid, admin_access, consumed_capacity,
             capacity_charges)
          SELECT s.driver, s.pool, s.device, s.share_id, s.claim_uid, s.admin,
                 s.consumed::jsonb, '[]'::jsonb
          FROM sorted s WHERE s.plain
          ORDER BY s.i
          ON CONFLICT DO NOTHING
          RETURNING 1
        )
        SELECT CASE WHEN (SELECT count(*) FROM inserted) = (SELECT count(*) FROM sorted WHERE plain)
                    THEN coalesce((SELECT array_agg(i::integer ORDER BY i) FROM sorted WHERE NOT plain),
                                  '{}')
               END
        INTO charged;
        IF charged IS NULL THEN
          RAISE EXCEPTION USING ERRCODE = 'QM004';
        END IF;
        FOREACH j IN ARRAY charged LOOP
          refused := qm_insert_device_claim(d_driver[j], d_pool[j], d_device[j], d_share_id[j],
                                            d_claim_uid[j], d_admin_access[j],
                                            d_consumed[j]::jsonb, d_charges[j]::jsonb);
          IF refused IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QM005';
          END IF;
        END LOOP;
      END IF;
      IF qn > 0 THEN
        IF EXISTS (SELECT 1 FROM unnest(q_namespace, q_key, q_hard) AS c(ns, key, hard)
                   WHERE coalesce((SELECT u.used FROM quota_usage u
                                   WHERE u.namespace = c.ns AND u.key = c.key), 0) > c.hard) THEN
          RAISE EXCEPTION USING ERRCODE = 'QM006';
        END IF;
      END IF;
      FOR k IN 1 .. rn LOOP
        PERFORM qm_release_claim(r_uid[k]);
      END LOOP;
      IF nd > 0 THEN
        WITH gone AS (
          DELETE FROM objects o
          USING unnest(w_op, w_resource, w_namespace, w_name, w_expected) WITH ORDINALITY
                AS w(op, r, ns, n, exp, i)
          WHERE w.op = 'd' AND o.resource = w.r AND o.namespace = w.ns AND o.name = w.n
            AND (w.exp = 0 OR o.resource_version = w.exp)
          RETURNING w.i::integer AS i,
                    ROW(rvs[w.i::integer], 'DELETED', o.resource, o.namespace, o.name, o.uid,
                        o.generation, o.creation_timestamp, o.deletion_timestamp,
                        o.labels::text::json, o.meta::text::json, o.fields::text::json,
                        o.spec_digest, o.body::text::json, now())::change_log AS logged
        )
        SELECT array_agg(g.i ORDER BY g.i), array_agg(g.logged ORDER BY g.i)
        INTO gone_at, gone_rows
        FROM gone g;
        IF coalesce(array_length(gone_at, 1), 0) <> nd THEN
          RAISE EXCEPTION USING ERRCODE = 'QM003';
        END IF;
        IF dn > 0 AND EXISTS (SELECT 1 FROM unnest(gone_rows) AS g
                              WHERE g.uid = ANY (d_claim_uid)) THEN
          RAISE EXCEPTION USING ERRCODE = 'QM004';
        END IF;
        INSERT INTO change_log SELECT * FROM unnest(gone_rows);
      END IF;
      IF coalesce(array_length(a_group, 1), 0) > 0 THEN
        INSERT INTO audit_events (at, request_id, username, groups, verb, api_group, resource,
                                  subresource, namespace, name, code, source, user_agent)
        SELECT to_timestamp(x.t / 1e6), x.r, x.u,
               ARRAY(SELECT jsonb_array_elements_text(x.gr::jsonb)), x.v, x.ag, x.res, x.sub,
               x.ns, x.n, x.c, x.src, x.ua
        FROM unnest(a_at, a_request, a_user, a_groups, a_verb, a_api_group, a_resource,
                    a_subresource, a_namespace, a_name, a_code, a_source, a_user_agent)
             AS x(t, r, u, gr, v, ag, res, sub, ns, n, c, src, ua);
      END IF;
      PERFORM pg_notify('qm_changes', rvs[wn]::text);
      RETURN QUERY
        SELECT w.g, (w.i - min(w.i) OVER (PARTITION BY w.g) + 1)::integer, rvs[w.i::integer],
               NULL::text, (x.logged).uid, (x.logged).generation,
               extract(epoch FROM (x.logged).creation_timestamp)::bigint,
               CASE WHEN (x.logged).rv IS NOT NULL
                    THEN coalesce(extract(epoch FROM (x.logged).deletion_timestamp)::bigint, 0)
               END,
               (x.logged).labels::text, (x.logged).meta::text, (x.logged).fields::text,
               (x.logged).spec_digest, (x.logged).body::text
        FROM unnest(w_group) WITH ORDINALITY AS w(g, i)
        CROSS JOIN LATERAL (
          SELECT gone_rows[array_position(gone_at, w.i::integer)] AS logged) AS x
        ORDER BY w.i;
      RETURN;
    EXCEPTION WHEN OTHERS THEN
      NULL;  -- rolled back to the savepoint: write by write below
    END;
  END IF;
  RETURN QUERY
    SELECT * FROM qm_write_batch_each(
      groups, w_group, w_op, w_resource, w_namespace, w_name, w_uid, w_generation, w_creation,
      w_deletion, w_labels, w_meta, w_fields, w_digest, w_body, w_expected, d_group, d_driver,
      d_pool, d_device, d_share_id, d_claim_uid, d_admin_access, d_consumed, d_charges, r_group,
      r_uid, q_group, q_namespace, q_key, q_hard, s_group, s_namespace, s_count, s_newest,
      a_group, a_at, a_request, a_user, a_groups, a_verb, a_api_group, a_resource,
      a_subresource, a_namespace, a_name, a_code, a_source, a_user_agent);
END
$$;
