-- Limits the database enforces in the transaction that takes from them, whichever replica
-- commits (docs/reliability.md): the capacity of consumable devices, the shared counters of
-- partitionable devices, and ResourceQuota usage. The writer supplies what each ledger row takes
-- and from which limit (it read both from the ResourceSlices it allocated against); the database
-- adds it up, refuses what does not fit, and gives it back when the claim is released.

-- What is in use of one limited amount: a capacity of a consumable device (kind 'capacity',
-- owner the device) or a counter of a pool's counter set (kind 'counter', owner the set).
-- `total` is the limit as the last writer that took from it read it. A row exists while
-- something is in use.
CREATE TABLE device_usage (
  driver  text    COLLATE "C" NOT NULL,
  pool    text    COLLATE "C" NOT NULL,
  kind    text    NOT NULL CHECK (kind IN ('capacity', 'counter')),
  owner   text    COLLATE "C" NOT NULL,
  name    text    COLLATE "C" NOT NULL,
  used    numeric NOT NULL,
  total   numeric NOT NULL,
  PRIMARY KEY (driver, pool, kind, owner, name),
  CONSTRAINT device_usage_within_total CHECK (used <= total)
);

-- What each ledger row took from its device's capacity: [[capacity, amount], ...], amounts in
-- units. Rows written before this migration are charged below, from the slices stored now.
ALTER TABLE device_allocations ADD COLUMN capacity_charges jsonb NOT NULL DEFAULT '[]';

-- A partitionable device takes its counters once, however many shares of it are allocated: the
-- first ledger row that holds it records them here (counters: [[set, counter, amount], ...]) and
-- adds them to device_usage; when its last row is released they are given back.
CREATE TABLE device_counter_holds (
  driver    text  COLLATE "C" NOT NULL,
  pool      text  COLLATE "C" NOT NULL,
  device    text  COLLATE "C" NOT NULL,
  counters  jsonb NOT NULL,
  PRIMARY KEY (driver, pool, device)
);

-- Adds `amount` to a usage row whose limit is `total`; false, changing nothing, when that would
-- pass the limit.
CREATE FUNCTION qm_take_usage(p_driver text, p_pool text, p_kind text, p_owner text,
                              p_name text, p_amount numeric, p_total numeric)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  got integer;
BEGIN
  IF p_amount <= 0 THEN
    RETURN true;
  END IF;
  IF p_amount > p_total THEN
    RETURN false;
  END IF;
  INSERT INTO device_usage AS u (driver, pool, kind, owner, name, used, total)
  VALUES (p_driver, p_pool, p_kind, p_owner, p_name, p_amount, p_total)
  ON CONFLICT (driver, pool, kind, owner, name) DO UPDATE
    SET used = u.used + excluded.used, total = excluded.total
    WHERE u.used + excluded.used <= excluded.total
  RETURNING 1 INTO got;
  RETURN got IS NOT NULL;
END
$$;

CREATE FUNCTION qm_give_back_usage(p_driver text, p_pool text, p_kind text, p_owner text,
                                   p_name text, p_amount numeric)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE device_usage SET used = used - p_amount
  WHERE driver = p_driver AND pool = p_pool AND kind = p_kind AND owner = p_owner
    AND name = p_name;
  DELETE FROM device_usage
  WHERE driver = p_driver AND pool = p_pool AND kind = p_kind AND owner = p_owner
    AND name = p_name AND used <= 0;
END
$$;

-- Inserts one ledger row and takes its charges ({"capacity": [[capacity, amount, limit], ...],
-- "counters": [[set, counter, amount, limit], ...]}, amounts and limits in units). Returns NULL,
-- or why it cannot: 'taken' (a second exclusive holder, or the row exists) or 'overcommit' (a
-- charge does not fit). After a refusal the caller rolls back what the call did.
CREATE FUNCTION qm_insert_device_claim(p_driver text, p_pool text, p_device text,
                                       p_share_id text, p_claim_uid text,
                                       p_admin_access boolean, p_consumed jsonb,
                                       p_charges jsonb)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  got integer;
  c jsonb;
  v_capacity jsonb := CASE WHEN jsonb_typeof(p_charges -> 'capacity') = 'array'
                           THEN p_charges -> 'capacity' ELSE '[]' END;
  v_counters jsonb := CASE WHEN jsonb_typeof(p_charges -> 'counters') = 'array'
                           THEN p_charges -> 'counters' ELSE '[]' END;
BEGIN
  -- Admin access takes nothing from anyone.
  IF p_admin_access THEN
    v_capacity := '[]';
    v_counters := '[]';
  END IF;
  INSERT INTO device_allocations
    (driver, pool, device, share_id, claim_uid, admin_access, consumed_capacity,
     capacity_charges)
  VALUES (p_driver, p_pool, p_device, p_share_id, p_claim_uid, p_admin_access, p_consumed,
          (SELECT coalesce(jsonb_agg(jsonb_build_array(e.v -> 0, e.v -> 1)), '[]')
           FROM jsonb_array_elements(v_capacity) AS e(v)))
  ON CONFLICT DO NOTHING
  RETURNING 1 INTO got;
  IF got IS NULL THEN
    RETURN 'taken';
  END IF;
  FOR c IN SELECT value FROM jsonb_array_elements(v_capacity) LOOP
    IF NOT qm_take_usage(p_driver, p_pool, 'capacity', p_device, c ->> 0, (c ->> 1)::numeric,
                         (c ->> 2)::numeric) THEN
      RETURN 'overcommit';
    END IF;
  END LOOP;
  IF jsonb_array_length(v_counters) > 0 THEN
    got := NULL;
    INSERT INTO device_counter_holds (driver, pool, device, counters)
    VALUES (p_driver, p_pool, p_device,
            (SELECT jsonb_agg(jsonb_build_array(e.v -> 0, e.v -> 1, e.v -> 2))
             FROM jsonb_array_elements(v_counters) AS e(v)))
    ON CONFLICT DO NOTHING
    RETURNING 1 INTO got;
    -- Only the device's first holder takes its counters.
    IF got IS NOT NULL THEN
      FOR c IN SELECT value FROM jsonb_array_elements(v_counters) LOOP
        IF NOT qm_take_usage(p_driver, p_pool, 'counter', c ->> 0, c ->> 1, (c ->> 2)::numeric,
                             (c ->> 3)::numeric) THEN
          RETURN 'overcommit';
        END IF;
      END LOOP;
    END IF;
  END IF;
  RETURN NULL;
END
$$;

-- Deletes a claim's ledger rows and gives back what they took: each share's capacity, and the
-- counters of each device none of whose rows is left.
CREATE FUNCTION qm_release_claim(p_claim_uid text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  c jsonb;
  held jsonb;
BEGIN
  -- The DELETE completes before the loop runs: every row of the claim is gone by then.
  FOR r IN DELETE FROM device_allocations WHERE claim_uid = p_claim_uid
           RETURNING driver, pool, device, admin_access, capacity_charges LOOP
    FOR c IN SELECT value FROM jsonb_array_elements(r.capacity_charges) LOOP
      PERFORM qm_give_back_usage(r.driver, r.pool, 'capacity', r.device, c ->> 0,
                                 (c ->> 1)::numeric);
    END LOOP;
    CONTINUE WHEN r.admin_access;
    held := NULL;
    DELETE FROM device_counter_holds h
    WHERE h.driver = r.driver AND h.pool = r.pool AND h.device = r.device
      AND NOT EXISTS (SELECT 1 FROM device_allocations a
                      WHERE a.driver = r.driver AND a.pool = r.pool AND a.device = r.device
                        AND NOT a.admin_access)
    RETURNING h.counters INTO held;
    CONTINUE WHEN held IS NULL;
    FOR c IN SELECT value FROM jsonb_array_elements(held) LOOP
      PERFORM qm_give_back_usage(r.driver, r.pool, 'counter', c ->> 0, c ->> 1,
                                 (c ->> 2)::numeric);
    END LOOP;
  END LOOP;
END
$$;

-- A ResourceClaim that is deleted, by whatever path, takes its ledger rows (and what they hold)
-- with it: the ledger never outlives the claims it stands for.
CREATE FUNCTION qm_release_deleted_claim()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM qm_release_claim(OLD.uid);
  RETURN NULL;
END
$$;

CREATE TRIGGER objects_release_claim AFTER DELETE ON objects FOR EACH ROW
  WHEN (OLD.resource = 'resourceclaims.resource.k8s.io')
  EXECUTE FUNCTION qm_release_deleted_claim();

-- Ledger rows written before this migration: what they hold is counted from the ResourceSlices
-- stored now (the newest generation of each pool), as the binder would have charged them, so
-- that new allocations fit around them. A usage that already passes its limit (the overcommit
-- this migration closes) is kept as it is, with the limit raised to it for the CHECK, and
-- refuses every new charge until enough is released. Rows of devices no slice publishes take
-- nothing.

-- A Kubernetes quantity ("80Gi", "500m", "1.5", "2e3") in units, rounded up to 1n as
-- resource.Quantity rounds; NULL when it does not parse. Used only here.
CREATE FUNCTION qm_upgrade_quantity(p text)
RETURNS numeric
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  m text[];
  v numeric;
BEGIN
  m := regexp_match(p, '^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]{1,3})?$');
  IF m IS NULL THEN
    RETURN NULL;
  END IF;
  v := m[1]::numeric * CASE coalesce(m[2], '')
    WHEN '' THEN 1::numeric
    WHEN 'Ki' THEN 1024::numeric WHEN 'Mi' THEN 1048576::numeric
    WHEN 'Gi' THEN 1073741824::numeric WHEN 'Ti' THEN 1099511627776::numeric
    WHEN 'Pi' THEN 1125899906842624::numeric WHEN 'Ei' THEN 1152921504606846976::numeric
    WHEN 'n' THEN 0.000000001 WHEN 'u' THEN 0.000001 WHEN 'm' THEN 0.001
    WHEN 'k' THEN 1e3 WHEN 'M' THEN 1e6 WHEN 'G' THEN 1e9 WHEN 'T' THEN 1e12
    WHEN 'P' THEN 1e15 WHEN 'E' THEN 1e18
    ELSE power(10::numeric, substr(m[2], 2)::integer) END;
  RETURN trim_scale(ceil(v * 1000000000) / 1000000000);
END
$$;

-- The devices and counter sets of the newest generation of every pool.
CREATE TEMPORARY TABLE qm_upgrade_slices ON COMMIT DROP AS
WITH slices AS (
  SELECT body #>> '{spec,driver}' AS driver, body #>> '{spec,pool,name}' AS pool,
         CASE WHEN jsonb_typeof(body #> '{spec,pool,generation}') = 'number'
              THEN (body #>> '{spec,pool,generation}')::numeric ELSE 0 END AS generation,
         body -> 'spec' AS spec
  FROM objects WHERE resource = 'resourceslices.resource.k8s.io'
)
SELECT s.driver, s.pool, s.spec FROM slices AS s
WHERE s.driver IS NOT NULL AND s.pool IS NOT NULL
  AND s.generation = (SELECT max(t.generation) FROM slices AS t
                      WHERE t.driver = s.driver AND t.pool = s.pool);

CREATE TEMPORARY TABLE qm_upgrade_devices ON COMMIT DROP AS
SELECT DISTINCT ON (s.driver, s.pool, d.device ->> 'name')
       s.driver, s.pool, d.device ->> 'name' AS device, d.device AS body
FROM qm_upgrade_slices AS s
CROSS JOIN LATERAL jsonb_array_elements(
  CASE WHEN jsonb_typeof(s.spec -> 'devices') = 'array' THEN s.spec -> 'devices' ELSE '[]' END)
  AS d(device)
WHERE jsonb_typeof(d.device -> 'name') = 'string'
ORDER BY s.driver, s.pool, d.device ->> 'name';

-- (driver, pool, counter set, counter) -> the counter's value.
CREATE TEMPORARY TABLE qm_upgrade_counters ON COMMIT DROP AS
SELECT DISTINCT ON (s.driver, s.pool, cs.set ->> 'name', c.key)
       s.driver, s.pool, cs.set ->> 'name' AS counter_set, c.key AS counter,
       qm_upgrade_quantity(c.value ->> 'value') AS total
FROM qm_upgrade_slices AS s
CROSS JOIN LATERAL jsonb_array_elements(
  CASE WHEN jsonb_typeof(s.spec -> 'sharedCounters') = 'array'
       THEN s.spec -> 'sharedCounters' ELSE '[]' END) AS cs(set)
CROSS JOIN LATERAL jsonb_each(
  CASE WHEN jsonb_typeof(cs.set -> 'counters') = 'object' THEN cs.set -> 'counters'
       ELSE '{}' END) AS c(key, value)
WHERE jsonb_typeof(cs.set -> 'name') = 'string' AND jsonb_typeof(c.value) = 'object'
  AND qm_upgrade_quantity(c.value ->> 'value') IS NOT NULL
ORDER BY s.driver, s.pool, cs.set ->> 'name', c.key;

-- Each share's capacity charges: its consumedCapacity against the capacities its device
-- publishes (a name may carry the driver's domain, as requests may write it).
UPDATE device_allocations AS a SET capacity_charges = c.charges
FROM (
  SELECT a2.driver, a2.pool, a2.device, a2.share_id, a2.claim_uid,
         jsonb_agg(jsonb_build_array(cap.name, qm_upgrade_quantity(cons.value #>> '{}')::text)
                   ORDER BY cap.name) AS charges
  FROM device_allocations AS a2
  JOIN qm_upgrade_devices AS dev
    ON dev.driver = a2.driver AND dev.pool = a2.pool AND dev.device = a2.device
  CROSS JOIN LATERAL jsonb_each(
    CASE WHEN jsonb_typeof(a2.consumed_capacity) = 'object' THEN a2.consumed_capacity
         ELSE '{}' END) AS cons(key, value)
  CROSS JOIN LATERAL (
    SELECT CASE WHEN jsonb_typeof(dev.body -> 'capacity' -> cons.key) = 'object' THEN cons.key
                WHEN left(cons.key, length(a2.driver) + 1) = a2.driver || '/'
                 AND jsonb_typeof(dev.body -> 'capacity'
                                  -> substr(cons.key, length(a2.driver) + 2)) = 'object'
                THEN substr(cons.key, length(a2.driver) + 2) END AS name) AS cap
  WHERE a2.share_id <> '' AND NOT a2.admin_access AND cap.name IS NOT NULL
    AND jsonb_typeof(cons.value) = 'string'
    AND qm_upgrade_quantity(cons.value #>> '{}') > 0
    AND qm_upgrade_quantity(dev.body -> 'capacity' -> cap.name ->> 'value') IS NOT NULL
  GROUP BY a2.driver, a2.pool, a2.device, a2.share_id, a2.claim_uid
) AS c
WHERE a.driver = c.driver AND a.pool = c.pool AND a.device = c.device
  AND a.share_id = c.share_id AND a.claim_uid = c.claim_uid;

INSERT INTO device_usage (driver, pool, kind, owner, name, used, total)
SELECT u.driver, u.pool, 'capacity', u.device, u.name, u.used, greatest(u.total, u.used)
FROM (
  SELECT a.driver, a.pool, a.device, ch.v ->> 0 AS name, sum((ch.v ->> 1)::numeric) AS used,
         max(qm_upgrade_quantity(dev.body -> 'capacity' -> (ch.v ->> 0) ->> 'value')) AS total
  FROM device_allocations AS a
  JOIN qm_upgrade_devices AS dev
    ON dev.driver = a.driver AND dev.pool = a.pool AND dev.device = a.device
  CROSS JOIN LATERAL jsonb_array_elements(a.capacity_charges) AS ch(v)
  GROUP BY a.driver, a.pool, a.device, ch.v ->> 0
) AS u
WHERE u.used > 0;

-- Each device some non-admin row holds takes what it consumes of its pool's counters, once.
INSERT INTO device_counter_holds (driver, pool, device, counters)
SELECT dev.driver, dev.pool, dev.device,
       jsonb_agg(jsonb_build_array(cons.c ->> 'counterSet', ctr.key,
                                   qm_upgrade_quantity(ctr.value ->> 'value')::text)
                 ORDER BY cons.c ->> 'counterSet', ctr.key)
FROM qm_upgrade_devices AS dev
CROSS JOIN LATERAL jsonb_array_elements(
  CASE WHEN jsonb_typeof(dev.body -> 'consumesCounters') = 'array'
       THEN dev.body -> 'consumesCounters' ELSE '[]' END) AS cons(c)
CROSS JOIN LATERAL jsonb_each(
  CASE WHEN jsonb_typeof(cons.c -> 'counters') = 'object' THEN cons.c -> 'counters'
       ELSE '{}' END) AS ctr(key, value)
JOIN qm_upgrade_counters AS pc
  ON pc.driver = dev.driver AND pc.pool = dev.pool AND pc.counter_set = cons.c ->> 'counterSet'
 AND pc.counter = ctr.key
WHERE jsonb_typeof(ctr.value) = 'object'
  AND qm_upgrade_quantity(ctr.value ->> 'value') IS NOT NULL
  AND EXISTS (SELECT 1 FROM device_allocations AS a
              WHERE a.driver = dev.driver AND a.pool = dev.pool AND a.device = dev.device
                AND NOT a.admin_access)
GROUP BY dev.driver, dev.pool, dev.device;

INSERT INTO device_usage (driver, pool, kind, owner, name, used, total)
SELECT u.driver, u.pool, 'counter', u.counter_set, u.counter, u.used,
       greatest(pc.total, u.used)
FROM (
  SELECT h.driver, h.pool, ch.v ->> 0 AS counter_set, ch.v ->> 1 AS counter,
         sum((ch.v ->> 2)::numeric) AS used
  FROM device_counter_holds AS h
  CROSS JOIN LATERAL jsonb_array_elements(h.counters) AS ch(v)
  GROUP BY h.driver, h.pool, ch.v ->> 0, ch.v ->> 1
) AS u
JOIN qm_upgrade_counters AS pc
  ON pc.driver = u.driver AND pc.pool = u.pool AND pc.counter_set = u.counter_set
 AND pc.counter = u.counter
WHERE u.used > 0;

DROP TABLE qm_upgrade_counters, qm_upgrade_devices, qm_upgrade_slices;
DROP FUNCTION qm_upgrade_quantity(text);

-- What a pod or a ResourceClaim counts against ResourceQuota keys, from its stored body: the
-- same counts as model::json::QuotaUsage (src/model/json/quota_usage.cc; tests compare the two):
-- an unfinished pod counts `pods` and `count/pods`; a claim counts
-- `count/resourceclaims.resource.k8s.io` and, per device class, the devices its ExactCount
-- requests ask for (the largest subrequest of a firstAvailable request). Keys counting 0 are
-- left out.
CREATE FUNCTION qm_quota_usage(p_resource text, p_body jsonb)
RETURNS TABLE (key text, amount bigint)
LANGUAGE sql IMMUTABLE AS $$
  SELECT k, 1::bigint FROM unnest(ARRAY['pods', 'count/pods']) AS k
  WHERE p_resource = 'pods'
    AND coalesce(CASE WHEN jsonb_typeof(p_body #> '{status,phase}') = 'string'
                      THEN p_body #>> '{status,phase}' END, '') NOT IN ('Succeeded', 'Failed')
  UNION ALL
  SELECT 'count/resourceclaims.resource.k8s.io', 1::bigint
  WHERE p_resource = 'resourceclaims.resource.k8s.io'
  UNION ALL
  SELECT per_request.class || '.deviceclass.resource.k8s.io/devices', sum(per_request.n)::bigint
  FROM (
    SELECT r.ord, d.class, max(d.n) AS n
    FROM jsonb_array_elements(
           CASE WHEN p_resource = 'resourceclaims.resource.k8s.io'
                 AND jsonb_typeof(p_body #> '{spec,devices,requests}') = 'array'
                THEN p_body #> '{spec,devices,requests}' ELSE '[]' END)
         WITH ORDINALITY AS r(request, ord)
    CROSS JOIN LATERAL (
      SELECT r.request -> 'exactly' AS one WHERE jsonb_typeof(r.request -> 'exactly') = 'object'
      UNION ALL
      SELECT s.one FROM jsonb_array_elements(
               CASE WHEN jsonb_typeof(r.request -> 'firstAvailable') = 'array'
                    THEN r.request -> 'firstAvailable' ELSE '[]' END) AS s(one)
    ) AS sub
    CROSS JOIN LATERAL (
      SELECT CASE WHEN jsonb_typeof(sub.one -> 'deviceClassName') = 'string'
                  THEN sub.one ->> 'deviceClassName' ELSE '' END AS class,
             CASE WHEN coalesce(CASE WHEN jsonb_typeof(sub.one -> 'allocationMode') = 'string'
                                     THEN sub.one ->> 'allocationMode' END, '')
                       NOT IN ('', 'ExactCount') THEN 0
                  WHEN jsonb_typeof(sub.one -> 'count') = 'number'
                   AND (sub.one ->> 'count') ~ '^-?[0-9]{1,18}$'
                  THEN (sub.one ->> 'count')::bigint
                  ELSE 1 END AS n
    ) AS d
    GROUP BY r.ord, d.class
  ) AS per_request
  GROUP BY per_request.class
  HAVING sum(per_request.n) <> 0
$$;

-- Quota usage per namespace and key, for the namespaces that have a ResourceQuota, kept by
-- triggers on objects whoever writes: every insert, delete and relevant update of a pod or a
-- claim there adds its difference in the same transaction, and a namespace's first quota counts
-- what the namespace holds (its last takes the rows away). Admission checks it in the creating
-- transaction (qm_apply_batch's quota checks). Namespaces without a quota cost one index probe
-- per write.
CREATE TABLE quota_usage (
  namespace  text   COLLATE "C" NOT NULL,
  key        text   COLLATE "C" NOT NULL,
  used       bigint NOT NULL,
  PRIMARY KEY (namespace, key)
);

CREATE FUNCTION qm_add_quota_usage(p_namespace text, p_resource text, p_body jsonb,
                                   p_sign integer)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM objects
                 WHERE resource = 'resourcequotas' AND namespace = p_namespace) THEN
    RETURN;
  END IF;
  INSERT INTO quota_usage AS q (namespace, key, used)
  SELECT p_namespace, u.key, p_sign * u.amount FROM qm_quota_usage(p_resource, p_body) AS u
  ON CONFLICT (namespace, key) DO UPDATE SET used = q.used + excluded.used;
END
$$;

CREATE FUNCTION qm_count_quota_usage()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    PERFORM qm_add_quota_usage(OLD.namespace, OLD.resource, OLD.body, -1);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    PERFORM qm_add_quota_usage(NEW.namespace, NEW.resource, NEW.body, 1);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER objects_quota_insert AFTER INSERT ON objects FOR EACH ROW
  WHEN (NEW.resource IN ('pods', 'resourceclaims.resource.k8s.io'))
  EXECUTE FUNCTION qm_count_quota_usage();
-- Only what counts: a pod's phase, a claim's spec (immutable through the API).
CREATE TRIGGER objects_quota_update AFTER UPDATE ON objects FOR EACH ROW
  WHEN ((NEW.resource = 'pods'
         AND OLD.body #> '{status,phase}' IS DISTINCT FROM NEW.body #> '{status,phase}')
        OR (NEW.resource = 'resourceclaims.resource.k8s.io'
            AND OLD.body -> 'spec' IS DISTINCT FROM NEW.body -> 'spec'))
  EXECUTE FUNCTION qm_count_quota_usage();
CREATE TRIGGER objects_quota_delete AFTER DELETE ON objects FOR EACH ROW
  WHEN (OLD.resource IN ('pods', 'resourceclaims.resource.k8s.io'))
  EXECUTE FUNCTION qm_count_quota_usage();

-- A namespace's usage is counted from its first ResourceQuota on, and forgotten with its last.
CREATE FUNCTION qm_count_namespace_usage(p_namespace text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_usage WHERE namespace = p_namespace;
  IF NOT EXISTS (SELECT 1 FROM objects
                 WHERE resource = 'resourcequotas' AND namespace = p_namespace) THEN
    RETURN;
  END IF;
  INSERT INTO quota_usage (namespace, key, used)
  SELECT p_namespace, u.key, sum(u.amount)
  FROM objects AS o CROSS JOIN LATERAL qm_quota_usage(o.resource, o.body) AS u
  WHERE o.resource IN ('pods', 'resourceclaims.resource.k8s.io') AND o.namespace = p_namespace
  GROUP BY u.key;
END
$$;

CREATE FUNCTION qm_track_quota_namespace()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NOT EXISTS (SELECT 1 FROM objects WHERE resource = 'resourcequotas'
                   AND namespace = NEW.namespace AND name <> NEW.name) THEN
      PERFORM qm_count_namespace_usage(NEW.namespace);
    END IF;
  ELSIF NOT EXISTS (SELECT 1 FROM objects
                    WHERE resource = 'resourcequotas' AND namespace = OLD.namespace) THEN
    DELETE FROM quota_usage WHERE namespace = OLD.namespace;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER objects_quota_namespace_insert AFTER INSERT ON objects FOR EACH ROW
  WHEN (NEW.resource = 'resourcequotas')
  EXECUTE FUNCTION qm_track_quota_namespace();
CREATE TRIGGER objects_quota_namespace_delete AFTER DELETE ON objects FOR EACH ROW
  WHEN (OLD.resource = 'resourcequotas')
  EXECUTE FUNCTION qm_track_quota_namespace();

SELECT qm_count_namespace_usage(namespace)
FROM (SELECT DISTINCT namespace FROM objects WHERE resource = 'resourcequotas') AS q;

-- qm_apply_batch (migrations/0003) again, now with each ledger row's charges (d_charges, as
-- qm_insert_device_claim takes them), releases that give charges back, and quota checks (q_*:
-- one per check, sorted by group; after the group's writes, the namespace's usage of the key must
-- be at most q_hard). More failure codes: overcommit (a ledger row's charges do not fit; ord =
-- the row) and quota (a check failed; ord = the check).
DROP FUNCTION qm_apply_batch(integer, integer[], boolean[], text[], text[], text[], text[],
                             bigint[], bigint[], bigint[], text[], text[], text[], text[],
                             text[], bigint[], integer[], text[], text[], text[], text[],
                             text[], boolean[], text[], integer[], text[]);

CREATE FUNCTION qm_apply_batch(
  groups integer,
  w_group integer[], w_create boolean[], w_resource text[], w_namespace text[], w_name text[],
  w_uid text[], w_generation bigint[], w_creation bigint[], w_deletion bigint[],
  w_labels text[], w_meta text[], w_fields text[], w_digest text[], w_body text[],
  w_expected bigint[],
  d_group integer[], d_driver text[], d_pool text[], d_device text[], d_share_id text[],
  d_claim_uid text[], d_admin_access boolean[], d_consumed text[], d_charges text[],
  r_group integer[], r_uid text[],
  q_group integer[], q_namespace text[], q_key text[], q_hard bigint[])
RETURNS TABLE (grp integer, ord integer, rv bigint, code text)
LANGUAGE plpgsql AS $$
DECLARE
  g integer;
  i integer := 1;  -- next write
  j integer := 1;  -- next ledger row
  k integer := 1;  -- next released claim
  q integer := 1;  -- next quota check
  wn integer := coalesce(array_length(w_group, 1), 0);
  dn integer := coalesce(array_length(d_group, 1), 0);
  rn integer := coalesce(array_length(r_group, 1), 0);
  qn integer := coalesce(array_length(q_group, 1), 0);
  first_write integer;
  first_row integer;
  first_check integer;
  refused text;
  got bigint;
  revisions bigint[];
  failed_code text;
  failed_ord integer;
BEGIN
  FOR g IN 1 .. groups LOOP
    first_write := i;
    first_row := j;
    first_check := q;
    revisions := '{}';
    failed_code := NULL;
    BEGIN
      WHILE k <= rn AND r_group[k] = g LOOP
        PERFORM qm_release_claim(r_uid[k]);
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
                   OR SQLSTATE 'QM004' OR SQLSTATE 'QM005' OR SQLSTATE 'QM006' THEN
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
      WHILE q <= qn AND q_group[q] = g LOOP q := q + 1; END LOOP;
      grp := g;
      ord := failed_ord;
      rv := NULL;
      code := CASE failed_code WHEN 'QM001' THEN 'exists' WHEN 'QM002' THEN 'missing'
                               WHEN 'QM003' THEN 'conflict' WHEN 'QM004' THEN 'taken'
                               WHEN 'QM005' THEN 'overcommit' ELSE 'quota' END;
      RETURN NEXT;
    END IF;
  END LOOP;
END
$$;
