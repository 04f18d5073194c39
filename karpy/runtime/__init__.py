"""An async controller runtime for Kubernetes: client, informers, cache, work queues,
controllers, manager and leader election. It imports nothing else from karpy, so it can
be used on its own to write any controller."""
