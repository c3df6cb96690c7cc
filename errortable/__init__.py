"""errortable: failed records in the RFC-20 ErrorRecord schema, committed with the main
commit, queried with SQL."""

from __future__ import annotations

from errortable import config
from errortable.config import ErrorTableConfig, ErrorTableLocation, locate
from errortable.schema import arrow_schema, avro_schema

__all__ = ["ErrorTableConfig", "ErrorTableLocation", "arrow_schema", "avro_schema", "config",
           "locate"]
