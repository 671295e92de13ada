"""Pure decisions over a pod spec and the runtime's view: no I/O, tested on vectors.

What one sync must do (``actions``), back-off, QoS and OOM scores, grace periods, the
container hash, the CRI configs a spec asks for (``criconfig``), the security context,
sysctls and the order in which containers stop.
"""
