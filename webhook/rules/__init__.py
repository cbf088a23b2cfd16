"""The rules: placement, node affinity, the pod plan, mutation, validation, the scale-down
guard, extender verbs, audit, node removal, zone risk. Pure functions over the Store; imports
only ``wire``, ``model`` and below."""
