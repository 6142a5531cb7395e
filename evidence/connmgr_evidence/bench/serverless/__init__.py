"""Short-lived producers (the serverless class) measured on the real secure tier, and their
report (``python -m connmgr.bench.serverless``; the measurement is
:mod:`connmgr.realkafka.serverless`, the figures :mod:`connmgr.bench.serverless.figures`)."""
