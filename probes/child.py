"""``python -m ledger.probes.child``: one probe process; the protocol is probes/protocol.py."""

import sys

from ledger.probes.protocol import child_main

if __name__ == "__main__":
    sys.exit(child_main())
