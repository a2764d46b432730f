"""The PostgreSQL backend of the storage protocol (``[storage] backend = "postgres"``; the ``postgres``
extra). Nothing here is imported unless that backend is configured."""
