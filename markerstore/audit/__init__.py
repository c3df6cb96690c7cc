"""Audits of a table that read across the packages (the commit protocol and the error
tables): ``verify_all`` (``markerstore verify``) and ``build`` (``markerstore report``).
An entry point's layer: it composes commit/ and errortable/, which never import each
other."""

from markerstore.audit.report import Report, build, parse_since
from markerstore.audit.verify import verify_all

__all__ = ["Report", "build", "parse_since", "verify_all"]
