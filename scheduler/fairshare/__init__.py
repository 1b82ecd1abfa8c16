"""Fair share (FSH): tenants sharing metered sandboxes. The claim itself lives with the run lifecycle
(scheduler/sql/claim.sql); this room holds what operators read and change: each org's limits and pause."""
