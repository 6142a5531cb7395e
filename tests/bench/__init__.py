"""Tests of the main job: grid, schema, runs, Spark comparison and report."""
