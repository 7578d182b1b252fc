"""Comment commands: the parser, their context, and the handlers that run them."""
