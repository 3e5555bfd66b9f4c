"""Pure parsers: text in, model objects out. They never touch the host; bad input raises ParseError."""
