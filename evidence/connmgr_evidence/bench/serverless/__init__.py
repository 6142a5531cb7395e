"""Short-lived producers (the serverless class) measured on the real secure tier, and their
report (``python -m connmgr_evidence.bench.serverless``; the measurement is
:mod:`connmgr_evidence.realkafka.serverless`, the figures
:mod:`connmgr_evidence.bench.serverless.figures`)."""
