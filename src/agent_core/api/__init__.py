"""Public SDK facade: the runtime, run handles, replay and inspect."""
