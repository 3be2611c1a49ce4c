"""The ``spanwatch`` command shell: the command registry and the demo wiring. Nothing imports it."""
