"""Every word the bot writes goes through here: the one jinja2 environment and the Markdown escaper."""
