"""The durable per-agent inbox and its wake-up path: teammates, background jobs, schedules and channels
all reach an agent this way (``docs/teams.md``)."""
