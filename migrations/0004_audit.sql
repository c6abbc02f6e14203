-- The audit trail (docs/security.md): one row per state-changing request, inserted in the same
-- transaction as the change it records, and one per denied request (401/403), inserted shortly
-- after. Read through /apis/audit.quartermaster.io/v1/events; rows older than the retention
-- (--audit-retention) are pruned.
CREATE TABLE audit_events (
  id           bigserial PRIMARY KEY,
  at           timestamptz NOT NULL,
  request_id   text NOT NULL,
  username     text COLLATE "C" NOT NULL,
  groups       text[] NOT NULL,
  verb         text NOT NULL,
  api_group    text COLLATE "C" NOT NULL,
  resource     text COLLATE "C" NOT NULL,
  subresource  text NOT NULL,
  namespace    text COLLATE "C" NOT NULL,
  name         text COLLATE "C" NOT NULL,
  code         integer NOT NULL,
  source       text NOT NULL,
  user_agent   text NOT NULL
);

CREATE INDEX audit_events_at ON audit_events (at);
CREATE INDEX audit_events_user ON audit_events (username, id);
CREATE INDEX audit_events_object ON audit_events (resource, name, id);
