"""The service side: state transitions, timers, retries. Never runs user code."""
