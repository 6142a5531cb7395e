"""kafka-connmgr-evidence: what measures and checks the product (:mod:`connmgr`).

The benchmark grid and its report (:mod:`connmgr_evidence.bench`), real clients on the
embedded cluster (:mod:`connmgr_evidence.realrun`), a real Apache Kafka cluster
(:mod:`connmgr_evidence.realkafka`) and the Java client with the project's kafka-clients
patch (:mod:`connmgr_evidence.java`). It depends on the product at the same version; the
product never imports it (``tests/test_architecture.py``). Its commands (``connmgr bench``,
``run``, ``cluster``, ``adoption``, ``longrun``) reach the ``connmgr`` command line through
the ``connmgr.commands`` entry-point group (:mod:`connmgr_evidence.cli`).
"""

__version__ = "0.1.0"
