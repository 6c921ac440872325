"""Where metrics go: a plain JSONL log now; MLflow joins behind the same protocol."""
