"""Desired pods and the tasks that drive each one: the syncLoop and the pod workers."""
