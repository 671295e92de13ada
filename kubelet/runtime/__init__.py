"""The container runtime driven toward pod specs: the pod driver, images, isolation, logs."""
