#pragma once

// Every SQL statement the PostgreSQL store runs, as named, parameterized constants.
// DDL lives in migrations/ only.
namespace qm::store::pg::queries {

// Serialises writers so that revisions commit in the order they were assigned; a watch that has
// seen revision N can then never miss a smaller one that commits later. Taken once per batch.
inline constexpr char kLockWrites[] = "SELECT pg_advisory_xact_lock(7236011)";

// Insert an object and its change-log entry in one statement; no row when the key exists.
// $1 resource, $2 namespace, $3 name, $4 uid, $5 generation, $6 creation (epoch s),
// $7 deletion (epoch s, 0 = none), $8 labels, $9 meta, $10 fields, $11 spec digest, $12 body.
inline constexpr char kInsertObject[] = R"sql(
WITH ins AS (
  INSERT INTO objects (resource, namespace, name, uid, resource_version, generation,
                       creation_timestamp, deletion_timestamp, labels, meta, fields, spec_digest,
                       body)
  VALUES ($1, $2, $3, $4, nextval('resource_version_seq'), $5, to_timestamp($6::bigint),
          to_timestamp(NULLIF($7::bigint, 0)), $8::text::jsonb, $9::text::jsonb,
          $10::text::jsonb, $11, $12::text::jsonb)
  ON CONFLICT (resource, namespace, name) DO NOTHING
  RETURNING *)
INSERT INTO change_log (rv, event_type, resource, namespace, name, uid, generation,
                        creation_timestamp, deletion_timestamp, labels, meta, fields, spec_digest,
                        body)
SELECT resource_version, 'ADDED', resource, namespace, name, uid, generation, creation_timestamp,
       deletion_timestamp, $8::text, $9::text, $10::text, spec_digest, $12::text
FROM ins
RETURNING rv)sql";

// Same parameters plus $13, the expected resourceVersion (0: any); no row when the key is
// missing or the revision differs.
inline constexpr char kUpdateObject[] = R"sql(
WITH upd AS (
  UPDATE objects SET uid = $4, resource_version = nextval('resource_version_seq'),
                     generation = $5, creation_timestamp = to_timestamp($6::bigint),
                     deletion_timestamp = to_timestamp(NULLIF($7::bigint, 0)),
                     labels = $8::text::jsonb, meta = $9::text::jsonb, fields = $10::text::jsonb,
                     spec_digest = $11, body = $12::text::jsonb
  WHERE resource = $1 AND namespace = $2 AND name = $3
    AND ($13::bigint = 0 OR resource_version = $13::bigint)
  RETURNING *)
INSERT INTO change_log (rv, event_type, resource, namespace, name, uid, generation,
                        creation_timestamp, deletion_timestamp, labels, meta, fields, spec_digest,
                        body)
SELECT resource_version, 'MODIFIED', resource, namespace, name, uid, generation,
       creation_timestamp, deletion_timestamp, $8::text, $9::text, $10::text, spec_digest,
       $12::text FROM upd
RETURNING rv)sql";

// Deletes an object and logs its last state; no row when the key is missing or the revision
// differs ($4, 0: any).
inline constexpr char kDeleteObject[] = R"sql(
WITH del AS (
  DELETE FROM objects
  WHERE resource = $1 AND namespace = $2 AND name = $3
    AND ($4::bigint = 0 OR resource_version = $4::bigint)
  RETURNING *)
INSERT INTO change_log (rv, event_type, resource, namespace, name, uid, generation,
                        creation_timestamp, deletion_timestamp, labels, meta, fields, spec_digest,
                        body)
SELECT nextval('resource_version_seq'), 'DELETED', resource, namespace, name, uid, generation,
       creation_timestamp, deletion_timestamp, labels::text, meta::text, fields::text,
       spec_digest, body::text FROM del
RETURNING resource, namespace, name, uid, rv, generation,
          extract(epoch FROM creation_timestamp)::bigint,
          COALESCE(extract(epoch FROM deletion_timestamp)::bigint, 0),
          labels::text, meta::text, fields::text, spec_digest, body::text)sql";

inline constexpr char kObjectRevision[] = R"sql(
SELECT resource_version FROM objects WHERE resource = $1 AND namespace = $2 AND name = $3)sql";

inline constexpr char kSelectColumns[] = R"sql(
SELECT resource, namespace, name, uid, resource_version, generation,
       extract(epoch FROM creation_timestamp)::bigint,
       COALESCE(extract(epoch FROM deletion_timestamp)::bigint, 0),
       labels::text, meta::text, fields::text, spec_digest, body::text
FROM objects )sql";

inline constexpr char kGetObjectWhere[] = "WHERE resource = $1 AND namespace = $2 AND name = $3";

inline constexpr char kListAllOrder[] = "ORDER BY resource, namespace, name";

// One statement, so one snapshot: the newest revision, then a page of objects of one resource
// (all namespaces when $2 is ''), the first $5 after ($3, $4) in (namespace, name) order. Always at
// least one row; when no object matches, the object columns (from the second on) are NULL. Row
// order as for kChangesSince: the caller checks it.
inline constexpr char kListObjects[] = R"sql(
SELECT r.rv, o.* FROM (SELECT COALESCE(MAX(rv), 0) AS rv FROM change_log) r LEFT JOIN LATERAL (
  SELECT resource, namespace, name, uid, resource_version, generation,
         extract(epoch FROM creation_timestamp)::bigint AS created,
         COALESCE(extract(epoch FROM deletion_timestamp)::bigint, 0) AS deleted,
         labels::text AS labels, meta::text AS meta, fields::text AS fields, spec_digest,
         body::text AS body
  FROM objects
  WHERE resource = $1 AND ($2::text = '' OR namespace = $2::text) AND (namespace, name) > ($3, $4)
  ORDER BY namespace, name
  LIMIT $5) o ON true)sql";

inline constexpr char kNotify[] = "SELECT pg_notify('qm_changes', $1::text)";

inline constexpr char kCurrentRevision[] = "SELECT COALESCE(MAX(rv), 0) FROM change_log";

// One statement, so one snapshot: the compaction point and the first $2 changes after $1.
// Always at least one row; when no change follows, the change columns (from the second on) are
// NULL. The changes whose revisions are in $3 (the caller has them already) come with NULL
// labels, meta, fields and body, so their stored JSON is neither converted nor sent. The rows
// come in the subquery's order as PostgreSQL runs this plan, which SQL does not promise: the
// caller checks it (an outer ORDER BY would sort every row once more).
inline constexpr char kChangesSince[] = R"sql(
SELECT s.compacted_through, c.* FROM store_state s LEFT JOIN LATERAL (
  SELECT resource, namespace, name, uid, rv, generation,
         extract(epoch FROM creation_timestamp)::bigint AS created,
         COALESCE(extract(epoch FROM deletion_timestamp)::bigint, 0) AS deleted,
         CASE WHEN known THEN NULL ELSE labels::text END AS labels,
         CASE WHEN known THEN NULL ELSE meta::text END AS meta,
         CASE WHEN known THEN NULL ELSE fields::text END AS fields, spec_digest,
         CASE WHEN known THEN NULL ELSE body::text END AS body, event_type
  FROM (SELECT *, rv = ANY($3::bigint[]) AS known FROM change_log
        WHERE rv > $1 ORDER BY rv LIMIT $2) l) c ON true)sql";

inline constexpr char kCompactDelete[] = R"sql(
DELETE FROM change_log WHERE rv <= $1 AND rv < (SELECT MAX(rv) FROM change_log))sql";
inline constexpr char kCompactRecord[] = R"sql(
UPDATE store_state SET compacted_through = GREATEST(compacted_through, $1))sql";

inline constexpr char kPing[] = "SELECT 1";

// Migrator.
inline constexpr char kCreateMigrationsTable[] = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version     text        PRIMARY KEY,
  applied_at  timestamptz NOT NULL DEFAULT now()
))sql";
inline constexpr char kLockMigrations[] = "SELECT pg_advisory_xact_lock(7236012)";
inline constexpr char kAppliedMigrations[] = "SELECT version FROM schema_migrations";
inline constexpr char kRecordMigration[] = "INSERT INTO schema_migrations (version) VALUES ($1)";

// The device-allocation ledger (migrations/0002, 0005). Inserts a row and takes its charges
// ($8, JSON as ChargesJson writes it); one column: NULL, or why not ('taken': a second exclusive
// holder or a repeated row; 'overcommit': a charge does not fit; the caller rolls back).
inline constexpr char kInsertDeviceClaim[] = R"sql(
SELECT qm_insert_device_claim($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb)
)sql";

// Independent writes and transactions without deletes in one call (migrations/0005): $1 the
// number of groups, $2..$16 the object writes as parallel arrays (group, create?, resource,
// namespace, name, uid, generation, creation, deletion, labels, meta, fields, spec digest, body,
// expected revision), $17..$25 the ledger rows (group, driver, pool, device, share id, claim
// uid, admin access, consumed capacity, charges), $26..$27 the released claims (group, claim
// uid), $28..$31 the quota checks (group, namespace, key, hard limit), $32..$35 the quota-set
// checks (group, namespace, count, newest revision; migrations/0010).
inline constexpr char kApplyBatch[] = R"sql(
SELECT grp, ord, rv, code FROM qm_apply_batch(
  $1::integer, $2::integer[], $3::boolean[], $4::text[], $5::text[], $6::text[], $7::text[],
  $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[],
  $14::text[], $15::text[], $16::bigint[], $17::integer[], $18::text[], $19::text[],
  $20::text[], $21::text[], $22::text[], $23::boolean[], $24::text[], $25::text[],
  $26::integer[], $27::text[], $28::integer[], $29::text[], $30::text[], $31::bigint[],
  $32::integer[], $33::text[], $34::bigint[], $35::bigint[]))sql";

// Deletes a claim's ledger rows and gives back what they took.
inline constexpr char kReleaseDeviceClaims[] = "SELECT qm_release_claim($1)";

inline constexpr char kListDeviceClaims[] = R"sql(
SELECT driver, pool, device, share_id, claim_uid, admin_access, consumed_capacity::text
FROM device_allocations
ORDER BY driver, pool, device, share_id, claim_uid
)sql";

// Quota usage (migrations/0005), kept by triggers on objects. Whether the usage of key $2 in
// namespace $1 is within $3; and a namespace's usage by key.
inline constexpr char kQuotaWithin[] = R"sql(
SELECT coalesce((SELECT used FROM quota_usage WHERE namespace = $1 AND key = $2), 0) <= $3::bigint
)sql";
inline constexpr char kQuotaUsed[] = "SELECT key, used FROM quota_usage WHERE namespace = $1";
// How many ResourceQuotas namespace $1 holds and the revision of the newest (0 without any), as
// qm_apply_batch's quota-set checks compare them.
inline constexpr char kQuotaSet[] = R"sql(
SELECT count(*), coalesce(max(resource_version), 0) FROM objects
WHERE resource = 'resourcequotas' AND namespace = $1
)sql";

// The audit trail (migrations/0004). Times are microseconds since the epoch; groups a JSON
// array per row.
inline constexpr char kInsertAudit[] = R"sql(
INSERT INTO audit_events (at, request_id, username, groups, verb, api_group, resource,
                          subresource, namespace, name, code, source, user_agent)
SELECT to_timestamp(t / 1e6), r, u, ARRAY(SELECT jsonb_array_elements_text(g::jsonb)), v, ag,
       res, sub, ns, n, c, s, ua
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::int[], $12::text[],
            $13::text[]) AS x(t, r, u, g, v, ag, res, sub, ns, n, c, s, ua)
)sql";

inline constexpr char kQueryAudit[] = R"sql(
SELECT id, (extract(epoch FROM at) * 1000000)::bigint, request_id, username,
       array_to_json(groups)::text, verb, api_group, resource, subresource, namespace, name,
       code, source, user_agent
FROM audit_events
WHERE ($1 = '' OR username = $1) AND ($2 = '' OR resource = $2) AND ($3 = '' OR namespace = $3)
  AND ($4 = '' OR name = $4) AND ($5::bigint = 0 OR at >= to_timestamp($5::bigint / 1e6))
  AND ($6::bigint = 0 OR at < to_timestamp($6::bigint / 1e6)) AND id > $7::bigint
ORDER BY id
LIMIT $8::bigint
)sql";

inline constexpr char kPruneAudit[] =
    "DELETE FROM audit_events WHERE at < to_timestamp($1::bigint / 1e6)";

// The allocation history (migrations/0006), read in one repeatable-read snapshot with the
// ledger. Times are microseconds since the epoch, converted exactly.
inline constexpr char kAllocationLedgerNow[] = R"sql(
SELECT a.driver, a.pool, a.device, a.share_id, a.claim_uid, COALESCE(o.namespace, ''),
       a.admin_access
FROM device_allocations a LEFT JOIN objects o ON o.uid = a.claim_uid
)sql";

inline constexpr char kAllocationHistorySince[] = R"sql(
SELECT id, ((extract(epoch FROM at - 'epoch'::timestamptz)) * 1000000)::bigint, driver, pool,
       device, share_id, claim_uid, claim_namespace, admin_access, delta
FROM allocation_history
WHERE at > 'epoch'::timestamptz + $1::bigint * interval '1 microsecond'
ORDER BY at, id
)sql";

// One device's holders and newest changes (the allocation_history_device index, migration 0009).
inline constexpr char kDeviceLedgerNow[] = R"sql(
SELECT a.driver, a.pool, a.device, a.share_id, a.claim_uid, COALESCE(o.namespace, ''),
       a.admin_access
FROM device_allocations a LEFT JOIN objects o ON o.uid = a.claim_uid COLLATE "default"
WHERE a.driver = $1 AND a.pool = $2 AND a.device = $3
)sql";

inline constexpr char kDeviceHistorySince[] = R"sql(
SELECT id, ((extract(epoch FROM at - 'epoch'::timestamptz)) * 1000000)::bigint, driver, pool,
       device, share_id, claim_uid, claim_namespace, admin_access, delta
FROM allocation_history
WHERE driver = $1 AND pool = $2 AND device = $3
  AND at > 'epoch'::timestamptz + $4::bigint * interval '1 microsecond'
ORDER BY at DESC, id DESC
LIMIT $5::bigint
)sql";

inline constexpr char kPruneAllocationHistory[] = R"sql(
DELETE FROM allocation_history WHERE at < 'epoch'::timestamptz + $1::bigint * interval '1 microsecond'
)sql";

// Node leases (migrations/0008): names in order, so that replicas renewing the same nodes at
// once take the row locks in the same order. Times are microseconds since the epoch.
inline constexpr char kRenewNodeLeases[] = R"sql(
INSERT INTO node_leases AS l (name, renewed_at)
SELECT u.name, 'epoch'::timestamptz + u.micros * interval '1 microsecond'
FROM unnest($1::text[], $2::bigint[]) AS u(name, micros)
ON CONFLICT (name) DO UPDATE SET renewed_at = greatest(l.renewed_at, excluded.renewed_at)
)sql";

inline constexpr char kNodeLeases[] = R"sql(
SELECT name, ((extract(epoch FROM renewed_at - 'epoch'::timestamptz)) * 1000000)::bigint
FROM node_leases
)sql";

}  // namespace qm::store::pg::queries
