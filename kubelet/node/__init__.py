"""The node: machine facts, node status, registration and the lease heartbeat."""
