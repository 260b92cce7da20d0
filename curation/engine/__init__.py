"""The stage engine: what a stage is, which exist, how a run executes them and stores what they decide."""
