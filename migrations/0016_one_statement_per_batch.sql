-- A batch in one statement and no explicit transaction. The writer ran four round trips per batch:
-- BEGIN, qm_begin_writes() (migrations/0014), qm_write_batch(...), COMMIT. Each wakes the one
-- writer backend and then the writer thread again, and while the cores are busy each wake waits
-- its turn, so a batch's commit took several scheduling delays longer than its work. The writer
-- now sends only `SELECT ... FROM qm_write_batch_at(...)` outside a transaction block: the
-- statement is its own transaction and commits (with its fsync) when it ends.
--
-- qm_write_batch_at takes the write lock, reads the change log's newest revision in a statement
-- of its own (in read committed mode each statement of a function takes a new snapshot, so it
-- sees every batch that committed before the lock was granted, as qm_begin_writes did), returns
-- it in a first row of group 0 (rv = that revision, every other column NULL), and then returns
-- qm_write_batch's rows for the same arguments. The lock is held until the statement's
-- transaction ends, so the batch's own revisions follow that revision with nothing between them.
-- qm_begin_writes stays for servers of the previous version during an upgrade.
CREATE FUNCTION qm_write_batch_at(
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
  newest bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(7236011);
  newest := (SELECT COALESCE(MAX(c.rv), 0) FROM change_log c);
  RETURN QUERY SELECT 0, 0, newest, NULL::text, NULL::text, NULL::bigint, NULL::bigint,
                      NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text;
  RETURN QUERY SELECT * FROM qm_write_batch(
    groups, w_group, w_op, w_resource, w_namespace, w_name, w_uid, w_generation, w_creation,
    w_deletion, w_labels, w_meta, w_fields, w_digest, w_body, w_expected, d_group, d_driver,
    d_pool, d_device, d_share_id, d_claim_uid, d_admin_access, d_consumed, d_charges, r_group,
    r_uid, q_group, q_namespace, q_key, q_hard, s_group, s_namespace, s_count, s_newest, a_group,
    a_at, a_request, a_user, a_groups, a_verb, a_api_group, a_resource, a_subresource,
    a_namespace, a_name, a_code, a_source, a_user_agent);
END
$$;
