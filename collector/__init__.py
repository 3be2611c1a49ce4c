"""spanwatch collector: polls and subscribes DCI switches and optics, exports to Prometheus and Parquet."""
