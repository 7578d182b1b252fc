"""The one place templates are rendered: every word the bot writes comes from templates/.

`environment()` builds the environment and registers every filter the templates use, here and nowhere
else: importing a module never changes it. Script templates (`*.py.j2`: reproducers and their drivers, run here and
by maintainers) are rendered by its twin, `script_environment()`, whose finalize refuses any value that no helper
of bot.text.scripts made safe for its context: a forgotten filter is an error, never a raw value in code.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

import templates
from bot.text import markdown, scripts
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


SCRIPT = ".py.j2"     # templates whose text is code: rendered by script_environment()


def _environment(**options: Any) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, **options)


@lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    """A StrictUndefined environment over templates/ (a missing variable is an error, not blank text)."""
    env = _environment(autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False))
    env.filters.update(FILTERS)
    return env


@lru_cache(maxsize=None)
def script_environment() -> jinja2.Environment:
    """The script templates' environment: only the context helpers as filters, and every printed value must be
    their `Code` (scripts.finalize raises RawValue otherwise)."""
    env = _environment(autoescape=False, finalize=scripts.finalize)
    env.filters.clear()      # jinja2's own (tojson, e, ...) make no value safe for code
    env.filters.update(scripts.FILTERS)
    return env


def environment_for(name: str) -> jinja2.Environment:
    """The environment that renders templates/<name>: the script one for `*.py.j2`, else the text one."""
    return script_environment() if name.endswith(SCRIPT) else environment()


def render(name: str, **context: Any) -> str:
    """Render templates/<name> with `context`; Markdown and HTML (GitHub, reports) carry no machine paths, and a
    script template prints only what the helpers of bot.text.scripts made."""
    text = environment_for(name).get_template(name).render(**context)
    return scrub(text) if name.endswith(LEAVING) else text
