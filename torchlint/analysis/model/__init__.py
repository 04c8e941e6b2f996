"""The per-file semantic model: imports and qualified names, scopes and bindings, reaching definitions,
literals, what a call returns, and the project index that resolves names across files."""
