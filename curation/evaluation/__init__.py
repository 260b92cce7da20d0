"""Evaluation of models on a release, the way each paper scored them (`curate eval`); plain Python, no Prefect."""
