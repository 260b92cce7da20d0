"""Exports of a release to the evaluation harnesses people already run: VLMEvalKit's custom TSV and an lmms-eval
task. Both read the release folder (not a run) and turn each question into one single-turn item with its gold
history (`curation.evaluation.judging.turn_items`)."""
