"""Files on disk: the locked durable file, JSONL transcripts."""
