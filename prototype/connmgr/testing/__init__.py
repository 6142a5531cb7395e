"""Test machinery that ships with the package: Hypothesis state machines for the property suite."""
