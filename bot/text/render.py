"""The one jinja2 environment: every word the bot writes comes from templates/.

`environment()` builds it and registers every filter the templates use, here and nowhere
else: importing a module never changes it.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

import templates
from bot.text import markdown
from harness.core.scrub import scrub
from harness.core.signature import gb_doc_url

TEMPLATE_DIR = Path(templates.__file__).parent
# Templates whose text leaves this machine (issue bodies, comments, replies, reports):
# the one edge where machine paths are scrubbed. Terminal output (.txt) keeps local paths.
LEAVING = (".md.j2", ".html.j2")
# Every filter the templates use: text safety for foreign text (bot.text.markdown), and a
# graph-break id's documentation page.
FILTERS = {"neutralize": markdown.neutralize, "cell": markdown.cell, "code": markdown.code, "fenced": markdown.fenced,
           "script": markdown.script, "prose": markdown.prose, "handle": markdown.handle, "gb_url": gb_doc_url}


@lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    """A StrictUndefined environment over templates/ (a missing variable is an error, not blank text)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env


def render(name: str, **context: Any) -> str:
    """Render templates/<name> with `context`; Markdown and HTML (GitHub, reports) carry no machine paths."""
    text = environment().get_template(name).render(**context)
    return scrub(text) if name.endswith(LEAVING) else text
