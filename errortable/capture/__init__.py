"""Capture: a batch or lines of records split into good rows and error records (the
Validator and its checks, the parsing of JSON and CSV lines, the ErrorRecord rows and
what a PII policy keeps out of them)."""
