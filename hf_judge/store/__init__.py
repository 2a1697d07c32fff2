"""The durable reply store: every accepted reply, keyed by its request, so that nothing is paid for twice."""
