-- The device-allocation ledger (ARCHITECTURE.md §4): one row per device given to a claim. The
-- partial unique index makes a second exclusive allocation of a device impossible, whichever
-- replica tries it; admin-access rows and consumable-capacity shares are not exclusive.
CREATE TABLE device_allocations (
  driver            text COLLATE "C" NOT NULL,
  pool              text COLLATE "C" NOT NULL,
  device            text COLLATE "C" NOT NULL,
  share_id          text COLLATE "C" NOT NULL DEFAULT '',
  claim_uid         text COLLATE "C" NOT NULL,
  admin_access      boolean NOT NULL DEFAULT false,
  consumed_capacity jsonb NOT NULL DEFAULT '{}'::jsonb,
  PRIMARY KEY (driver, pool, device, share_id, claim_uid)
);

CREATE UNIQUE INDEX device_allocations_exclusive
  ON device_allocations (driver, pool, device)
  WHERE share_id = '' AND NOT admin_access;

CREATE INDEX device_allocations_by_claim ON device_allocations (claim_uid);
