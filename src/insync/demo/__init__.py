"""`insync demo`: the seed scenarios replayed live on real processes."""
