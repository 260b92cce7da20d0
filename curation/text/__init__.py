"""Text filters: MinHash near-duplicates, language, stop words, the judgements (plain Python)."""
