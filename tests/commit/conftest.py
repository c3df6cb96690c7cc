"""Commit-layer tests run without a JVM; commit_checks holds their shared helpers."""
