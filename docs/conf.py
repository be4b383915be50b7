"""Sphinx configuration of the open-mxu manual (`make docs`; warnings are errors)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent / "_ext")]

project = "open-mxu"
author = "open-mxu contributors"
copyright = "2026, open-mxu contributors"
try:
    from importlib.metadata import version as _version

    release = _version("open-mxu")
except Exception:  # not installed: the manual still builds from a checkout
    release = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
    "mxu_docs",
]
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "open-mxu"
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Ports:" in component docstrings lists signature members like arguments.
napoleon_custom_sections = [("Ports", "params_style")]
# Docstrings are written for readers of the code (Google style, cross-references to project names);
# a reference Sphinx cannot resolve is not a broken page.
nitpicky = False
suppress_warnings = ["myst.header"]
# Option names such as --fusesoc must stay two hyphens in the command reference.
smartquotes = False
