"""SQLite session store, sequences and ids (docs/storage.md)."""
