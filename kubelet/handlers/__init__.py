"""Container handlers: exec, HTTP GET, TCP and gRPC, run the same way for probes and hooks."""
