-- Bodies over about 2 KB (a slice of 8 GPUs is one) are compressed when a row is stored, in
-- objects and again in change_log. With the default, pglz, pglz_compress was the first of
-- PostgreSQL's functions in a profile of the 50,000 x 8 setup (5% of its samples). lz4 compresses
-- several times faster to a similar size. Only values written from now on use it; rows already
-- stored stay as they are and read as before. A server built without lz4 keeps pglz.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_settings
             WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
    ALTER TABLE objects ALTER COLUMN body SET COMPRESSION lz4;
    ALTER TABLE change_log ALTER COLUMN body SET COMPRESSION lz4;
  END IF;
END
$$;
