#pragma once

// Every SQL statement the PostgreSQL store runs, as named, parameterized constants.
// DDL lives in migrations/ only.
namespace qm::store::pg::queries {

// Serialises writers so that revisions commit in the order they were assigned; a watch that has
// seen revision N can then never miss a smaller one that commits later. Taken once per batch.
inline constexpr char kLockWrites[] = "SELECT pg_advisory_xact_lock(7236011)";

// Insert an object and its change-log entry in one statement; no row when the key exists.
// $1 resource, $2 namespace, $3 name, $4 uid, $5 generation, $6 creation (epoch s),
// $7 deletion (epoch s, 0 = none), $8 labels, $9 meta, $10 fields, $11 spec digest, $12 body,
// $13 change-log snapshot.
inline constexpr char kInsertObject[] = R"sql(
WITH ins AS (
  INSERT INTO objects (resource, namespace, name, uid, resource_version, generation,
                       creation_timestamp, deletion_timestamp, labels, meta, fields, spec_digest,
                       body)
  VALUES ($1, $2, $3, $4, nextval('resource_version_seq'), $5, to_timestamp($6::bigint),
          to_timestamp(NULLIF($7::bigint, 0)), $8::jsonb, $9::jsonb, $10::jsonb, $11, $12::jsonb)
  ON CONFLICT (resource, namespace, name) DO NOTHING
  RETURNING resource_version)
INSERT INTO change_log (rv, event_type, resource, namespace, name, object)
SELECT resource_version, 'ADDED', $1, $2, $3, $13::json FROM ins
RETURNING rv)sql";

// Same parameters plus $14, the expected resourceVersion (0: any); no row when the key is
// missing or the revision differs.
inline constexpr char kUpdateObject[] = R"sql(
WITH upd AS (
  UPDATE objects SET uid = $4, resource_version = nextval('resource_version_seq'),
                     generation = $5, creation_timestamp = to_timestamp($6::bigint),
                     deletion_timestamp = to_timestamp(NULLIF($7::bigint, 0)), labels = $8::jsonb,
                     meta = $9::jsonb, fields = $10::jsonb, spec_digest = $11, body = $12::jsonb
  WHERE resource = $1 AND namespace = $2 AND name = $3
    AND ($14::bigint = 0 OR resource_version = $14::bigint)
  RETURNING resource_version)
INSERT INTO change_log (rv, event_type, resource, namespace, name, object)
SELECT resource_version, 'MODIFIED', $1, $2, $3, $13::json FROM upd
RETURNING rv)sql";

inline constexpr char kObjectRevision[] = R"sql(
SELECT resource_version FROM objects WHERE resource = $1 AND namespace = $2 AND name = $3)sql";

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

inline constexpr char kInsertDeletion[] = R"sql(
INSERT INTO change_log (rv, event_type, resource, namespace, name, object)
VALUES (nextval('resource_version_seq'), 'DELETED', $1, $2, $3, $4::json)
RETURNING rv)sql";

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
