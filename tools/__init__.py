"""Maintenance scripts run from a checkout: lock files, image bytecode, the image check."""
