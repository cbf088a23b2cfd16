"""Talking to a cluster: credentials, the API client, list+watch reflectors, the live view, the
saved-cluster file, and the choice between them. The only layer that reads from the API server."""
