"""Helpers for tests and benchmarks: a moto S3 server, a fault-injecting S3 proxy, a Java check."""
