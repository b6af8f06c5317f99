"""The shared vocabulary: history events, commands, workflow and activity definitions."""
