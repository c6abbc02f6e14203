-- API objects in the hub version, the global resourceVersion sequence and the change log.

CREATE SEQUENCE resource_version_seq AS bigint;

-- Keys compare byte-wise (COLLATE "C") whatever the database locale, so list order and
-- continue tokens agree with the in-memory cache.
CREATE TABLE objects (
  resource            text        COLLATE "C" NOT NULL,
  namespace           text        COLLATE "C" NOT NULL DEFAULT '',
  name                text        COLLATE "C" NOT NULL,
  uid                 text        NOT NULL,
  resource_version    bigint      NOT NULL,
  generation          bigint      NOT NULL,
  creation_timestamp  timestamptz NOT NULL,
  deletion_timestamp  timestamptz,
  labels              jsonb       NOT NULL DEFAULT '{}',
  -- annotations, finalizers, ownerReferences, generateName
  meta                jsonb       NOT NULL DEFAULT '{}',
  -- field-selector values extracted by the codec ("spec.nodeName": "n1")
  fields              jsonb       NOT NULL DEFAULT '{}',
  spec_digest         text        NOT NULL DEFAULT '',
  body                jsonb       NOT NULL,
  node_name           text GENERATED ALWAYS AS (fields ->> 'spec.nodeName') STORED,
  driver              text GENERATED ALWAYS AS (fields ->> 'spec.driver') STORED,
  pool                text GENERATED ALWAYS AS (fields ->> 'spec.pool.name') STORED,
  PRIMARY KEY (resource, namespace, name)
);

CREATE UNIQUE INDEX objects_uid ON objects (uid);
CREATE INDEX objects_node_name ON objects (resource, node_name) WHERE node_name IS NOT NULL;
CREATE INDEX objects_driver_pool ON objects (resource, driver, pool) WHERE driver IS NOT NULL;
CREATE INDEX objects_labels ON objects USING gin (labels);

-- One row per write, in resourceVersion order; watches replay it. Each row holds the object as
-- it was right after the write (for DELETED: its last state), in the same columns as objects.
-- The JSON columns are json, not jsonb: written once, read back whole by every replica.
CREATE TABLE change_log (
  rv                  bigint      PRIMARY KEY,
  event_type          text        NOT NULL CHECK (event_type IN ('ADDED', 'MODIFIED', 'DELETED')),
  resource            text        NOT NULL,
  namespace           text        NOT NULL,
  name                text        NOT NULL,
  uid                 text        NOT NULL,
  generation          bigint      NOT NULL,
  creation_timestamp  timestamptz NOT NULL,
  deletion_timestamp  timestamptz,
  labels              json        NOT NULL,
  meta                json        NOT NULL,
  fields              json        NOT NULL,
  spec_digest         text        NOT NULL,
  body                json        NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now()
);

-- Single-row bookkeeping: the newest revision removed from change_log by compaction.
CREATE TABLE store_state (
  id                 int    PRIMARY KEY CHECK (id = 1),
  compacted_through  bigint NOT NULL DEFAULT 0
);
INSERT INTO store_state (id, compacted_through) VALUES (1, 0);
