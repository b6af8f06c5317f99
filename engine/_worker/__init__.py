"""The worker side: polls task queues and runs workflow and activity code."""
