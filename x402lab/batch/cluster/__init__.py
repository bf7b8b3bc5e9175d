"""A batch of a Dask collection, run partition by partition on the current cluster as one batch.

``_distributed`` (the driver's side: ``on_cluster``, ``run_on_cluster``), ``_recipe`` (how a
worker connects the same lab, never with the key), ``_preflight`` (the whole batch priced
before any partition starts) and ``_worker`` (a worker's lab and partition run; it imports
``distributed``, so only the driver's side imports it, when a cluster batch runs).
"""

from x402lab.batch.cluster._distributed import is_dask_collection, on_cluster, run_on_cluster
from x402lab.batch.cluster._recipe import Connection, LabRecipe, recipe_of

__all__ = [
    "Connection",
    "LabRecipe",
    "is_dask_collection",
    "on_cluster",
    "recipe_of",
    "run_on_cluster",
]
