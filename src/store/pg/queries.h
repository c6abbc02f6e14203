#pragma once

// Every SQL statement the PostgreSQL store runs, as named, parameterized constants.
// DDL lives in migrations/ only.
namespace qm::store::pg::queries {

// Serialises writers so that revisions commit in the order they were assigned; a watch that has
// seen revision N can then never miss a smaller one that commits later.
inline constexpr char kLockWrites[] = "SELECT pg_advisory_xact_lock(7236011)";
inline constexpr char kNextRevision[] = "SELECT nextval('resource_version_seq')";

inline constexpr char kInsertObject[] = R"sql(
INSERT INTO objects (resource, namespace, name, uid, resource_version, generation,
                     creation_timestamp, deletion_timestamp, labels, meta, fields, spec_digest, body)
VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7::bigint), to_timestamp(NULLIF($8::bigint, 0)), $9::jsonb,
        $10::jsonb, $11::jsonb, $12, $13::jsonb)
ON CONFLICT (resource, namespace, name) DO NOTHING
RETURNING 1)sql";

inline constexpr char kUpdateObject[] = R"sql(
UPDATE objects SET uid = $4, resource_version = $5, generation = $6,
                   creation_timestamp = to_timestamp($7::bigint),
                   deletion_timestamp = to_timestamp(NULLIF($8::bigint, 0)), labels = $9::jsonb,
                   meta = $10::jsonb, fields = $11::jsonb, spec_digest = $12, body = $13::jsonb
WHERE resource = $1 AND namespace = $2 AND name = $3
  AND ($14::bigint = 0 OR resource_version = $14::bigint)
RETURNING 1)sql";

inline constexpr char kSelectColumns[] = R"sql(
SELECT resource, namespace, name, uid, resource_version, generation,
       extract(epoch FROM creation_timestamp)::bigint,
       COALESCE(extract(epoch FROM deletion_timestamp)::bigint, 0),
       labels::text, meta::text, fields::text, spec_digest, body::text
FROM objects )sql";

inline constexpr char kGetObjectWhere[] = "WHERE resource = $1 AND namespace = $2 AND name = $3";
inline constexpr char kGetObjectForUpdateWhere[] =
    "WHERE resource = $1 AND namespace = $2 AND name = $3 FOR UPDATE";

inline constexpr char kDeleteObject[] = R"sql(
DELETE FROM objects WHERE resource = $1 AND namespace = $2 AND name = $3)sql";

inline constexpr char kListWhere[] = R"sql(
WHERE resource = $1 AND ($2::text = '' OR namespace = $2::text) AND (namespace, name) > ($3, $4)
ORDER BY namespace, name
LIMIT $5)sql";

inline constexpr char kInsertChange[] = R"sql(
INSERT INTO change_log (rv, event_type, resource, namespace, name, object)
VALUES ($1, $2, $3, $4, $5, $6::json))sql";

inline constexpr char kNotify[] = "SELECT pg_notify('qm_changes', $1::text)";
inline constexpr char kListen[] = "LISTEN qm_changes";

inline constexpr char kCurrentRevision[] = "SELECT COALESCE(MAX(rv), 0) FROM change_log";
inline constexpr char kCompactedThrough[] = "SELECT compacted_through FROM store_state";

inline constexpr char kChangesSince[] = R"sql(
SELECT rv, event_type, object::text FROM change_log WHERE rv > $1 ORDER BY rv LIMIT $2)sql";

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

}  // namespace qm::store::pg::queries
