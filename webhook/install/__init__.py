"""Installing stszone: certificates, the manifests and their checks, the webhook registrations,
the deploy base. Pure apart from writing certificate files; no aiohttp, no kubernetes client."""
