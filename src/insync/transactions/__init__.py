"""The transaction coordinator's state and records (sans-IO); `server.txn_coordinator` drives it."""
