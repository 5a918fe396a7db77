"""The audited index's columns as arrays (``evo_core.harness.audited_index``): what a
proposer reads through ``ProposalContext.audited_index``: ``columns(r)`` and ``hash_order(r)``
for one audited rollout, ``view(rows)`` for the columns of many as arrays."""

from evo_core.harness.audited_index import (
    ABSENT,
    BOOL,
    FLOAT,
    INT,
    NONE,
    OTHER,
    STR,
    AuditedIndex,
    Column,
    ColumnView,
    columns_of,
    hash_order_of,
)

__all__ = ["ABSENT", "BOOL", "FLOAT", "INT", "NONE", "OTHER", "STR", "AuditedIndex", "Column", "ColumnView", "columns_of",
           "hash_order_of"]
