"""The stage library: plain Python, no Prefect and no Label Studio imports."""
