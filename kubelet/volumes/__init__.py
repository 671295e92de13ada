"""Pod volumes: the pod directory under --root-dir, and the volume plugins."""
