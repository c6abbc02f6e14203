-- The allocation history's triggers (migrations/0006, 0007) look each ledger row's claim up in
-- objects by uid. PL/pgSQL plans their statement once per connection, the first time a trigger
-- fires, and keeps the plan (qm_write_batch also forces generic plans). A plan made while the
-- objects table was small, as it is when a server makes its first bindings, hashed a scan of the
-- whole table, and the writer's connection kept running it as the table grew: a scan of every
-- object per batch that binds or releases a device (auto_explain under bench's
-- 5000pods_500nodes: Seq Scan on objects, then Hash Right Join, in every such batch). Inside
-- these two functions only, scans of whole tables and hash or merge joins are priced out, so the
-- plan is a nested loop over the ledger rows with one objects_uid lookup each, whatever the
-- size of the table when it was made.
ALTER FUNCTION qm_record_allocations() SET enable_seqscan = off;
ALTER FUNCTION qm_record_allocations() SET enable_hashjoin = off;
ALTER FUNCTION qm_record_allocations() SET enable_mergejoin = off;
ALTER FUNCTION qm_record_releases() SET enable_seqscan = off;
ALTER FUNCTION qm_record_releases() SET enable_hashjoin = off;
ALTER FUNCTION qm_record_releases() SET enable_mergejoin = off;
