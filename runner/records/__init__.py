"""The vocabulary every layer shares: statuses, transcripts, check outcomes, judgments, evidence."""
