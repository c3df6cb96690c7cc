"""A child process that publishes one commit and is killed in the middle of the Iceberg
commit: after the catalog wrote the new table metadata, before it took it.

    python -m tests.formats.iceberg_crash <pickled publisher arguments and commit>
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

from markerstore.formats.iceberg import IcebergPublisher


def main(path: str) -> None:
    with open(path, "rb") as source:
        url, storage_options, catalog, commit = pickle.load(source)
    publisher = IcebergPublisher(url, storage_options, catalog)
    catalog_object: Any = publisher.catalog
    write = catalog_object._write_metadata

    def write_then_die(*args: Any, **kwargs: Any) -> None:
        write(*args, **kwargs)
        os._exit(9)                          # killed: the catalog never takes it

    catalog_object._write_metadata = write_then_die
    publisher.publish(commit)
    sys.exit("the publish finished; it should have been killed")


if __name__ == "__main__":
    main(sys.argv[1])
