"""Writing: error files (Parquet, Avro), a task's error writer, the driver's error instant
(``commit``), its link to the main commit, and the recovery of error instants."""
