"""The replay core: deterministic event loop, instance, command matching. No SQL, no I/O."""
