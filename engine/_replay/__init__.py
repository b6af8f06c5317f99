"""The replay core: deterministic event loop, commands, matching. No SQL, no I/O."""
