"""Developer scripts (run as files: ``python scripts/<name>.py``)."""
