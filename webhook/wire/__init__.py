"""What travels on the wire: AdmissionReview and kube-scheduler extender types, JSON Patch, the
JSON codec. Pure; imports only ``model`` and below."""
