"""The real-workload lab: namespaces, qdiscs, real agents and a PyTorch job (``spanwatch lab``)."""
