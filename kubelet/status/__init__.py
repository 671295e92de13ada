"""Pod status: what the kubelet reports about each pod, and the manager that sends it."""
