"""The schema (promise 4: deploys need no downtime): deploy-safe migrate and the schema-shape check."""
