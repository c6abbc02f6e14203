#pragma once

// Every SQL statement the PostgreSQL store runs, as named, parameterized constants.
// DDL lives in migrations/ only.
namespace qm::store::pg::queries {

// Serialises writers so that revisions commit in the order they were assigned; a watch that has
// seen revision N can then never miss a smaller one that commits later. Taken once per batch.
inline constexpr char kLockWrites[] = "SELECT pg_advisory_xact_lock(7236011)";

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

// What the writer sends first for a batch: it opens the transaction block, takes the write lock
// and returns the newest revision of the change log, read once the lock is held
// (migrations/0014). One simple query, so one round trip; the block lasts until the writer's
// COMMIT or ROLLBACK (a BEGIN in a query string outlives the string).
inline constexpr char kBeginWrites[] = "BEGIN; SELECT qm_begin_writes()";

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

// A whole group commit in one call (migrations/0011): $1 the number of groups (independent
// writes and transactions), $2..$16 the object writes as parallel arrays (group, op 'c' create /
// 'u' update / 'd' delete, resource, namespace, name, uid, generation, creation, deletion,
// labels, meta, fields, spec digest, body, expected revision), $17..$25 the ledger rows (group,
// driver, pool, device, share id, claim uid, admin access, consumed capacity, charges),
// $26..$27 the released claims (group, claim uid), $28..$31 the quota checks (group, namespace,
// key, hard limit), $32..$35 the quota-set checks (group, namespace, count, newest revision),
// $36..$49 the audit rows (group, time in microseconds since the epoch, request id, user,
// groups as a JSON array, verb, API group, resource, subresource, namespace, name, code, source,
// user agent). A row per write of each group that succeeded (with a deleted object's last state)
// and one per group that failed (its failure code and the part that failed).
inline constexpr char kWriteBatch[] = R"sql(
SELECT grp, ord, rv, code, o_uid, o_generation, o_creation, o_deletion, o_labels, o_meta,
       o_fields, o_digest, o_body
FROM qm_write_batch(
  $1::integer, $2::integer[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
  $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[],
  $14::text[], $15::text[], $16::bigint[], $17::integer[], $18::text[], $19::text[],
  $20::text[], $21::text[], $22::text[], $23::boolean[], $24::text[], $25::text[],
  $26::integer[], $27::text[], $28::integer[], $29::text[], $30::text[], $31::bigint[],
  $32::integer[], $33::text[], $34::bigint[], $35::bigint[], $36::integer[], $37::bigint[],
  $38::text[], $39::text[], $40::text[], $41::text[], $42::text[], $43::text[], $44::text[],
  $45::text[], $46::text[], $47::integer[], $48::text[], $49::text[]))sql";

inline constexpr char kListDeviceClaims[] = R"sql(
SELECT driver, pool, device, share_id, claim_uid, admin_access, consumed_capacity::text
FROM device_allocations
ORDER BY driver, pool, device, share_id, claim_uid
)sql";

inline constexpr char kQuotaUsed[] = "SELECT key, used FROM quota_usage WHERE namespace = $1";

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

// The health history (migrations/0015), read with the allocation history.
inline constexpr char kHealthHistorySince[] = R"sql(
SELECT id, ((extract(epoch FROM at - 'epoch'::timestamptz)) * 1000000)::bigint, driver, pool,
       device, delta
FROM health_history
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

inline constexpr char kPruneHealthHistory[] = R"sql(
DELETE FROM health_history WHERE at < 'epoch'::timestamptz + $1::bigint * interval '1 microsecond'
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
