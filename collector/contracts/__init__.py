"""The contracts every part builds against, importable without the daemon: the metric catalogue, the
archive's layout and columns, fibre physics and the coherent optics profiles.

The analyzer, the simulator, the dashboards and the rules reach the collector only through these modules
and the config model.
"""
