"""A container's environment: variables, service links, ``$(VAR)``, DNS and /etc/hosts."""
