"""Stages that assign and merge labels: ProBench fields, category and task label normalisation."""
