"""Any input an analyst has, as the rows of a batch.

``_sources`` (a list, a Series, a DataFrame of pandas or polars, a file; lazily read texts for
embeddings) and ``_templates`` (``prompt="... {column} ..."`` filled from each row).
"""

from x402lab.batch.inputs._sources import (
    Texts,
    all_texts,
    as_pandas,
    chat_frame,
    embed_source,
    index_frame,
    with_prompt,
)
from x402lab.batch.inputs._templates import check_filled, fill_template, template_columns

__all__ = [
    "Texts",
    "all_texts",
    "as_pandas",
    "chat_frame",
    "check_filled",
    "embed_source",
    "fill_template",
    "index_frame",
    "template_columns",
    "with_prompt",
]
