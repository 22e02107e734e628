"""Sphinx configuration of jboost's documentation site.

Build it (warnings are errors, as in CI) and serve it::

    pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html
    python -m http.server -d docs/_build/html 8000

Why Sphinx (with MyST for the Markdown pages, autodoc and napoleon for the API): jboost's
docstrings are Google-style with reStructuredText roles (``:func:`jboost.fit```,
``:class:`jboost.Loss```), which Sphinx resolves into links and, with ``nitpicky``, reports when
they point nowhere; the user guide and the design notes stay Markdown files that read well on
GitHub too.

The API reference (``docs/api/``) is generated here from the package itself, one page per
namespace: the public names of ``jboost`` and of each subpackage's ``__all__`` at the path a user
imports them from, then each public module's own functions and classes. A public function or
class without a docstring, or one that no API page documents, is a warning (an error with
``-W``), so the reference cannot fall behind the code.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # the checkout's jboost, installed or not

import jboost  # noqa: E402
from sphinx.ext.napoleon import docstring as _napoleon  # noqa: E402
from sphinx.pycode import ModuleAnalyzer  # noqa: E402

project = "jboost"
author = "the jboost developers"
copyright = "2026, the jboost developers"
release = jboost.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
html_theme = "furo"
html_title = f"jboost {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# An attribute's or property's docstring is prose here: napoleon would read a first line with a
# colon ("Features the trees split on (with categorical columns: ...") as "type: description".
_napoleon.GoogleDocstring._consume_inline_attribute = (
    lambda self: ("", self._dedent(self._consume_to_end())))
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# Attributes are described in words (their shapes and meaning); their annotations would show the
# runtime classes behind jax.Array (jaxlib._jax.Array).
napoleon_attr_annotations = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
# Types only for documented parameters (a NamedTuple's fields are described under Variables).
autodoc_typehints_description_target = "documented"
napoleon_use_ivar = True

# Every cross-reference must resolve; references into the libraries jboost builds on (JAX,
# NumPy, optax, chex, scikit-learn, pandas...) are not checked (CI has no internet for
# intersphinx inventories).
nitpicky = True
nitpick_ignore_regex = [
    ("py:.*", r"(jax|jaxlib|numpy|np|jnp|optax|chex|sklearn|pandas|pd|matplotlib|shap|onnx|treelite|"
              r"typing|collections|enum|pathlib|os|io|dataclasses|functools|types|"
              r"concurrent|threading|builtins)(\..*)?"),
    ("py:class", r"(Array|ArrayLike|PRNGKey|Callable|Any|Sequence|Mapping|Iterable|Iterator|"
                 r"NamedTuple|Path|PathLike|DType|dtype|ndarray|Mesh|Device|Sharding|"
                 r"Optional|Union|Literal|TypeVar|Protocol|Self|T|K|V)"),
    ("py:.*", r"(int|float|str|bool|bytes|dict|list|tuple|set|object|None|type|callable|"
              r"optional|array|array-like|default|keyword)"),
]

# --------------------------------------------------------------------------------------------
# The API reference, generated from the package.

#: The namespaces with an API page, in the order of the data flow (jboost/__init__.py), then
#: the optional ones.
API_PACKAGES = ("jboost", *(f"jboost.{name}" for name in jboost.SUBMODULES), "jboost.sklearn",
                "jboost.checks", "jboost.devices")


def _public_modules(package: str) -> list[str]:
    """``package`` and the public modules below it (none of whose parts starts with ``_``)."""
    module = importlib.import_module(package)
    names = [package]
    if hasattr(module, "__path__") and package != "jboost":
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return names


def _exported(module_name: str) -> list[str]:
    """The names a namespace's ``__all__`` exports (documented at that path)."""
    return list(getattr(importlib.import_module(module_name), "__all__", ()))


def _own_members(module_name: str) -> dict[str, object]:
    """A module's public functions and classes that it defines itself."""
    module = importlib.import_module(module_name)
    return {name: value for name, value in vars(module).items()
            if not name.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
            and getattr(value, "__module__", None) == module_name}


@functools.lru_cache(maxsize=None)
def _documented_at_public_paths() -> dict[int, str]:
    """Each object exported by an ``__all__``, by id, and the one path it is documented at
    (the first namespace in API_PACKAGES that exports it)."""
    paths: dict[int, str] = {}
    for package in API_PACKAGES:
        module = importlib.import_module(package)
        for name in _exported(package):
            value = getattr(module, name)
            where = None if callable(value) else _documented_constant(package, name)
            paths.setdefault(id(value), f"{where or package}.{name}")
    return paths


def _documented_constant(package: str, name: str) -> str | None:
    """The module below ``package`` whose ``#:`` comment documents the constant ``name`` that
    ``package`` re-exports (a constant's own docstring is its type's: ``int``, ``dict``)."""
    for module_name in (*_public_modules(package), *_public_modules("jboost.losses"),
                        *_public_modules("jboost.engine")):
        attr_docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        if ("", name) in attr_docs:
            return module_name
    return None


def _directive(package: str, name: str, value: object) -> list[str]:
    path = f"{package}.{name}"
    if inspect.isclass(value):
        return [f".. autoclass:: {path}", "   :members:", ""]
    if callable(value):
        return [f".. autofunction:: {path}", ""]
    where = _documented_constant(package, name)
    if where and where != package:  # documented, with its comment, in its own module's section
        return [f"``{name}``: see :py:data:`{where}.{name}`.", ""]
    return [f".. autodata:: {path}", "   :no-value:", ""]


def _api_page(package: str, public_paths: dict[int, str]) -> str:
    """A namespace's page: its docstring and the names its ``__all__`` exports (or, without one,
    the functions and classes it defines), then each public module below it."""
    module = importlib.import_module(package)
    lines = [f"# `{package}`", "", "```{eval-rst}", f".. automodule:: {package}"]
    if _exported(package):
        lines += ["   :no-members:", ""]
        for name in _exported(package):
            value = getattr(module, name)
            if public_paths[id(value)] == f"{package}.{name}":
                lines += _directive(package, name, value)
            else:
                lines += [f"``{name}``: see :py:obj:`{public_paths[id(value)]}`.", ""]
    else:
        lines += _members_options(package, public_paths)
    lines.append("```")
    for sub in _public_modules(package)[1:]:
        lines += ["", f"## `{sub}`", "", "```{eval-rst}", f".. automodule:: {sub}",
                  *_members_options(sub, public_paths), "```"]
    return "\n".join(lines) + "\n"


def _members_options(module_name: str, public_paths: dict[int, str]) -> list[str]:
    """``:members:``, leaving out the names documented at a public path."""
    excluded = sorted(name for name, value in _own_members(module_name).items()
                      if id(value) in public_paths)
    return ["   :members:", *([f"   :exclude-members: {', '.join(excluded)}"] if excluded else [])]


def write_api_pages(app) -> None:
    """(Re)write docs/api/: one page per namespace and an index (only files whose text changed,
    so that an incremental build rebuilds only those)."""
    out = DOCS / "api"
    out.mkdir(exist_ok=True)
    public_paths = _documented_at_public_paths()
    pages = {"index.md": "# API reference\n\nOne page per namespace, in the order data flows "
                         "through jboost (tabular input, losses, trees, the engine, models, the "
                         "entry points, then model files, interpretation and plots).\n\n"
                         "```{toctree}\n:maxdepth: 1\n\n"
                         + "\n".join(API_PACKAGES) + "\n```\n"}
    for package in API_PACKAGES:
        pages[f"{package}.md"] = _api_page(package, public_paths)
    for name, text in pages.items():
        path = out / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    for stale in set(p.name for p in out.glob("*.md")) - set(pages):
        (out / stale).unlink()


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn generates set_*_request methods whose docstrings cross-reference its own docs.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    # A NamedTuple's fields: their class docstring describes them (its Attributes), and Python's
    # own "Alias for field number N" under each says nothing.
    if (getattr(obj, "__doc__", None) or "").startswith("Alias for field number"):
        return True
    return None


def check_public_names(app, env) -> None:
    """Warn (an error under -W) for every public function or class that has no docstring or
    no entry in the API reference."""
    from sphinx.util import logging

    logger = logging.getLogger("jboost.api")
    objects = env.get_domain("py").objects
    documented = set(objects)
    for package in API_PACKAGES:
        module = importlib.import_module(package)
        expected = {f"{package}.{name}": getattr(module, name) for name in _exported(package)}
        if not _exported(package):
            expected.update({f"{package}.{name}": value
                             for name, value in _own_members(package).items()})
        for sub in _public_modules(package)[1:]:
            expected.update({f"{sub}.{name}": value for name, value in _own_members(sub).items()})
        public_paths = _documented_at_public_paths()
        for path, value in expected.items():
            where = public_paths.get(id(value), path)
            if where not in documented:
                logger.warning(f"public name {path} has no entry in the API reference "
                               f"(expected at {where}: give it a docstring)")
            elif (inspect.isfunction(value) or inspect.isclass(value)) and not inspect.getdoc(value):
                logger.warning(f"public name {path} has no docstring")


def _resolve(target: str, module_name: str | None):
    """The object a docstring's reference names, and its dotted path: ``target`` relative to the
    module it appears in, as written, or below ``jboost``; None if none of these import."""
    for candidate in (f"{module_name}.{target}" if module_name else None, target, f"jboost.{target}"):
        if not candidate:
            continue
        parts = candidate.split(".")
        for split in range(len(parts), 0, -1):
            try:
                value = importlib.import_module(".".join(parts[:split]))
            except ImportError:
                continue
            try:
                for attribute in parts[split:]:
                    value = getattr(value, attribute)
            except AttributeError:
                break
            return value, candidate
    return None


def _documented_path(env, value, path: str) -> str | None:
    """Where the API reference documents ``value`` (found at ``path``): its public path, its
    defining module's path, or ``path`` itself (module data)."""
    objects = env.get_domain("py").objects
    public_paths = _documented_at_public_paths()
    candidates = [public_paths.get(id(value)) if not isinstance(value, (int, float, str, tuple)) else None]
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        candidates.append(f"{module}.{qualname}")
        head, _, tail = qualname.partition(".")
        if tail:  # a method or attribute of a class documented at a public path
            public_cls = public_paths.get(id(getattr(importlib.import_module(module), head, None)))
            if public_cls:
                candidates.append(f"{public_cls}.{tail}")
    candidates.append(path)
    parent, _, name = path.rpartition(".")
    if parent:  # an attribute of a documented object (a NamedTuple field, a dataclass field)
        found = _resolve(parent, None)
        if found is not None and found[0] is not value:
            parent_path = _documented_path(env, *found)
            if parent_path:
                candidates.append(f"{parent_path}.{name}")
    return next((c for c in candidates if c and c in objects), None)


def _missing_reference(app, env, node, contnode):
    """Resolve a docstring's short reference (``:func:`compute_borders```, ``:class:`Loss```)
    to the object's entry, wherever the API reference documents it."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    found = _resolve(target, node.get("py:module"))
    source = (node.source or "").partition(":docstring of ")[0]
    if found is None and source.endswith(".py"):  # a docstring shown at a public path: its module
        module = Path(source).resolve().relative_to(DOCS.parent).with_suffix("")
        found = _resolve(target, ".".join(p for p in module.parts if p != "__init__"))
    path = _documented_path(env, *found) if found is not None else None
    if path is None:
        return None
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, "obj", path, node,
                                              contnode)


def setup(app):
    app.connect("builder-inited", write_api_pages)
    app.connect("missing-reference", _missing_reference)
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("env-check-consistency", check_public_names)
    return {"parallel_read_safe": True}
