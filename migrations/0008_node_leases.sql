-- Node leases: when each node's agent was last heard, by whichever replica heard it
-- (Kubernetes keeps a Lease per node in kube-node-lease for the same purpose). Heartbeats are
-- kept in memory and written here in one statement per replica every few seconds, so every
-- replica's node monitor sees them without a write per heartbeat or per Node.
CREATE TABLE node_leases (
  name        text COLLATE "C" PRIMARY KEY,
  renewed_at  timestamptz NOT NULL
);

-- A Node that is deleted takes its lease with it: a new Node of the same name starts afresh.
CREATE FUNCTION qm_drop_node_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM node_leases WHERE name = OLD.name;
  RETURN NULL;
END $$;

CREATE TRIGGER objects_drop_node_lease AFTER DELETE ON objects FOR EACH ROW
  WHEN (OLD.resource = 'nodes')
  EXECUTE FUNCTION qm_drop_node_lease();
