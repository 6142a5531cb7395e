"""What the job runs on: the Spark session and its jobs
(:mod:`~connmgr_evidence.bench.runtime.spark`,
:mod:`~connmgr_evidence.bench.runtime.sparkjob`) and the worker pools
(:mod:`~connmgr_evidence.bench.runtime.pool`)."""
