-- The health history (docs/ui.md, UtilizationHistoryReview): one row each time a source of a
-- quartermaster.io/unhealthy taint starts (+1) or stops (-1) covering devices, written by row
-- triggers in the transaction that writes the source, whichever path or replica wrote it; a
-- utilization range then shows the unhealthy devices as they were, not as they are now. The
-- sources are a ResourceSlice device's own taints (one row per device: driver, pool, device)
-- and DeviceTaintRules (one row per rule, with its deviceSelector's driver, pool and device;
-- '' where the selector leaves one open, matching every device there). Times are
-- clock_timestamp(), as in allocation_history.
CREATE TABLE health_history (
  id      bigserial   PRIMARY KEY,
  at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  driver  text COLLATE "C" NOT NULL,
  pool    text COLLATE "C" NOT NULL,
  device  text COLLATE "C" NOT NULL,
  delta   smallint NOT NULL CHECK (delta IN (1, -1))
);

CREATE INDEX health_history_at ON health_history (at);

-- A JSON string's text; '' for anything else (as the service's lenient decoders read it).
CREATE FUNCTION qm_str(j jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN jsonb_typeof(j) = 'string' THEN j #>> '{}' ELSE '' END
$$;

-- The devices of a ResourceSlice body with an unhealthy taint of their own.
CREATE FUNCTION qm_unhealthy_devices(body jsonb) RETURNS TABLE (driver text, pool text, device text)
LANGUAGE sql IMMUTABLE AS $$
  SELECT DISTINCT qm_str(body #> '{spec,driver}'), qm_str(body #> '{spec,pool,name}'),
                  d ->> 'name'
  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(body #> '{spec,devices}') = 'array'
                                 THEN body #> '{spec,devices}' ELSE '[]'::jsonb END) AS d
  WHERE jsonb_typeof(d -> 'name') = 'string'
    AND jsonb_path_exists(d, '$.taints[*] ? (@.key == "quartermaster.io/unhealthy")')
$$;

-- A DeviceTaintRule body's selector when its taint is the unhealthy one (no row otherwise).
CREATE FUNCTION qm_unhealthy_rule(body jsonb) RETURNS TABLE (driver text, pool text, device text)
LANGUAGE sql IMMUTABLE AS $$
  SELECT qm_str(body #> '{spec,deviceSelector,driver}'),
         qm_str(body #> '{spec,deviceSelector,pool}'),
         qm_str(body #> '{spec,deviceSelector,device}')
  WHERE qm_str(body #> '{spec,taint,key}') = 'quartermaster.io/unhealthy'
$$;

CREATE FUNCTION qm_record_health() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  old_body jsonb := CASE WHEN TG_OP IN ('UPDATE', 'DELETE') THEN OLD.body END;
  new_body jsonb := CASE WHEN TG_OP IN ('INSERT', 'UPDATE') THEN NEW.body END;
  is_rule boolean := COALESCE(NEW.resource, OLD.resource) = 'devicetaintrules.resource.k8s.io';
BEGIN
  IF is_rule THEN
    WITH o AS (SELECT * FROM qm_unhealthy_rule(old_body) WHERE old_body IS NOT NULL),
         n AS (SELECT * FROM qm_unhealthy_rule(new_body) WHERE new_body IS NOT NULL)
    INSERT INTO health_history (driver, pool, device, delta)
    SELECT driver, pool, device, -1 FROM (SELECT * FROM o EXCEPT ALL SELECT * FROM n) gone
    UNION ALL
    SELECT driver, pool, device, 1 FROM (SELECT * FROM n EXCEPT ALL SELECT * FROM o) came;
  ELSE
    WITH o AS (SELECT * FROM qm_unhealthy_devices(old_body) WHERE old_body IS NOT NULL),
         n AS (SELECT * FROM qm_unhealthy_devices(new_body) WHERE new_body IS NOT NULL)
    INSERT INTO health_history (driver, pool, device, delta)
    SELECT driver, pool, device, -1 FROM (SELECT * FROM o EXCEPT SELECT * FROM n) gone
    UNION ALL
    SELECT driver, pool, device, 1 FROM (SELECT * FROM n EXCEPT SELECT * FROM o) came;
  END IF;
  RETURN NULL;
END $$;

-- Whether a slice or rule body has an unhealthy taint anywhere (a slice's checked without
-- unpacking its devices). Only writes where the old or the new body has one run qm_record_health:
-- other slices (a fleet joining) pay one path test each, other kinds a comparison.
CREATE FUNCTION qm_has_unhealthy(resource text, body jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE resource
    WHEN 'resourceslices.resource.k8s.io' THEN
      body @? '$.spec.devices[*].taints[*] ? (@.key == "quartermaster.io/unhealthy")'
    WHEN 'devicetaintrules.resource.k8s.io' THEN
      body #>> '{spec,taint,key}' = 'quartermaster.io/unhealthy'
    ELSE false
  END
$$;

CREATE TRIGGER objects_health_insert AFTER INSERT ON objects FOR EACH ROW
  WHEN (NEW.resource IN ('resourceslices.resource.k8s.io', 'devicetaintrules.resource.k8s.io')
        AND qm_has_unhealthy(NEW.resource, NEW.body))
  EXECUTE FUNCTION qm_record_health();

CREATE TRIGGER objects_health_update AFTER UPDATE ON objects FOR EACH ROW
  WHEN (NEW.resource IN ('resourceslices.resource.k8s.io', 'devicetaintrules.resource.k8s.io')
        AND (qm_has_unhealthy(NEW.resource, NEW.body) OR qm_has_unhealthy(OLD.resource, OLD.body)))
  EXECUTE FUNCTION qm_record_health();

CREATE TRIGGER objects_health_delete AFTER DELETE ON objects FOR EACH ROW
  WHEN (OLD.resource IN ('resourceslices.resource.k8s.io', 'devicetaintrules.resource.k8s.io')
        AND qm_has_unhealthy(OLD.resource, OLD.body))
  EXECUTE FUNCTION qm_record_health();
