"""The roles of the pipeline, one small module each. Each exposes one or two nodes."""
