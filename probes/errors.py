"""The one exception type probes raise for user errors (bad objective, bad transform,
bad batch shape). The CLI catches it once and prints its one-line message."""


class ProbeError(Exception):
    """A user error in a probe request; str(err) is a one-line message."""
