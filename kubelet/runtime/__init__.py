"""Driving the container runtime toward pod specs (pure decisions and CRI plumbing)."""
