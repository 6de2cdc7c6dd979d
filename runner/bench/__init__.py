"""`make bench`: the corpus, the suite and the self-test, end to end."""
