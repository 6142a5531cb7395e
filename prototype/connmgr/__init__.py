"""kafka-connmgr: connection management for Kafka clients, keyed by (host, port, node id).

The package is organised around one sans-IO policy core (:mod:`connmgr.core`), the policies
that run on it (:mod:`connmgr.policies`), a discrete-event simulator (:mod:`connmgr.sim`) and
the drivers that carry the policies' actions out against real sockets.
"""

__version__ = "0.1.0"
