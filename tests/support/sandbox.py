"""The secret the SQL sandbox tests plant outside the table (the `secret` fixture)."""

SECRET = "s3cr3t-outside-the-table"
