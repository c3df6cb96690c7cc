"""Reading: the committed error records of an error table (never writing), the read API
(``read``, ``connect``, ``query``) and the summary report."""
