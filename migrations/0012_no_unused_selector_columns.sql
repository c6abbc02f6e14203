-- objects.node_name, driver and pool (generated from the field-selector values, migrations/0001)
-- and their two partial indexes served no query: field and label selectors are applied by the
-- server's object cache, which every list and watch reads. Every insert and update computed the
-- three expressions (PostgreSQL builds them again for each statement) and kept both indexes.
-- The values stay in objects.fields should a query ever need them.
DROP INDEX objects_node_name;
DROP INDEX objects_driver_pool;
ALTER TABLE objects DROP COLUMN node_name, DROP COLUMN driver, DROP COLUMN pool;
