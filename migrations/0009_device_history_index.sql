-- One device's allocation history (DeviceAllocationHistoryReview, docs/ui.md): its changes,
-- newest first, without reading every device's.
CREATE INDEX allocation_history_device ON allocation_history (driver, pool, device, at);
