"""pytest glue beneath plugin.py: the gate's test-side state and checks, the xdist scheduler, the option
tables turned into pytest options and markers. Everything measured or judged comes from the engine."""
