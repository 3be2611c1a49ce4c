"""gNMI: the supervised streaming source (``source``), the grpc.aio client seam (``client``), notification
decoding (``decode``), subscription sets and their path tables (``paths``) and stream timing (``timing``)."""
