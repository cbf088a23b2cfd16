"""stszone: an admission webhook that keeps every StatefulSet alive in every availability zone."""

__version__ = "0.1.0"
