"""Comment commands: the parser, their context and steps, and the handlers that run them."""
