"""The package's tables pre-parsed, one module per table (knowledge.table_rows)."""
