"""Events: what the kubelet tells users about pods and the node (core/v1 Events)."""
