"""SQLite session store, sequences and ids (storage.md)."""
