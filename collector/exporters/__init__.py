"""Where collected data goes: Prometheus exposition over HTTP and the Parquet archive."""
