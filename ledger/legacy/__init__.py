"""The legacy JSON results: the tag -> cache_state rule, import and export."""
