"""The detection levels every engine of the analyzer benchmark applies (spanwatch's defaults), in one
place so the driver and the baselines import them without importing each other."""

DROP_ENTER, DROP_EXIT = 1.0, 0.5  # dropped packets per second
PFC_ENTER, PFC_EXIT = 0.01, 0.001  # share of time paused
QUEUE_ENTER, QUEUE_EXIT = 1e6, 5e5  # queue bytes (no BDP in the synthetic archive)
GAP_S = 2.0  # episodes closer than this merge
