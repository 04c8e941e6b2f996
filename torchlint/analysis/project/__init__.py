"""Facts across the project's files and the judgements built on them: what a module's forward
returns, which op owns a value, where a program runs, how sure a numerics finding is."""
