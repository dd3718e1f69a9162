"""Consumer groups: the membership protocol (`membership`), committed offsets (`offsets`), their messages."""
