"""Loading a model fitted with a distribution's loss: the loss is rebuilt from the name the file records."""

from __future__ import annotations

from typing import Optional

from jboost.io import loader, reader
from jboost.losses.distributions import families, nll_loss


def load_distributional(path, tree_family: Optional[type] = None):
    """:func:`jboost.load` for a model fitted with a distribution's loss: the file records the
    loss's name, from which the loss is rebuilt (its parameters are the file's)."""

    names = set()

    def walk(node):
        if isinstance(node, dict):
            if node.get("kind") == "loss" and isinstance(node.get("name"), str):
                names.add(node["name"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(reader.read_header(path))
    found = [n for n in names if n.removesuffix("_natural") in families.DISTRIBUTIONS]
    if len(found) != 1:
        raise ValueError(f"the model in {path} was not fitted with one of jboost's distributions "
                         f"({sorted(families.DISTRIBUTIONS)}); its losses: {sorted(names)}. Load it with "
                         "jboost.load(path, loss=...).")
    name = found[0]
    dist = families.DISTRIBUTIONS[name.removesuffix("_natural")]
    return loader.load(path, loss=nll_loss.loss(dist, natural_gradient=name.endswith("_natural")),
                       tree_family=tree_family)
