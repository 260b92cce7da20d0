"""Label Studio integration: labeling configs, push, pull, local server. Only this package talks to Label Studio.

Not built yet (the human-review issue); until then the flow's review stage runs in `auto` mode, which accepts
every item and records that no person reviewed it.
"""
