"""The PLEG: relist the runtime every second, keep the pod cache, tell the syncLoop."""
