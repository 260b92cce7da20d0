"""What every part of the stage library stands on: errors, secrets, hashing, caches, JSONL, seeds, parallel maps, decoding, text basics."""
