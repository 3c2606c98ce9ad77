"""Meta-training of the controlled AdamW's controller (docs/learned-adamw.md):
evolution strategies over whole runs on tasks drawn from task families."""
