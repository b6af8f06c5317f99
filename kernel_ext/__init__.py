"""Jupyter glue for durable-notebook (IPython and server extensions): see the Jupyter issue."""
